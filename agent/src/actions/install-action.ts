import { randomUUID } from "node:crypto";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Transport } from "@connectrpc/connect";
import type { AdbClient, AdbServerAddress } from "../adb-client.js";
import { shellV2 } from "../adb-shell.js";
import { getBlob } from "../blob-transfer.js";
import { ActionFailed, DispatchFailure, type ActionKind } from "../device-ownership.js";
import { shQuote } from "./shell-quote.js";
import { toDispatchFailure } from "./shell-outcome.js";

export interface InstallRequest {
  blobId: string;
}

/**
 * `farm install`: the APK comes from the coordinator's blob store (checked by
 * sha256), is pushed to the phone and installed with `pm install -r`. Nothing
 * reaches the phone before the APK is whole on the agent.
 */
export function installAction(adb: AdbServerAddress, client: AdbClient, transport: Transport, stagingDir: string): ActionKind<InstallRequest, { output: string }> {
  return {
    kind: "install",
    journalRequest: (req) => ({ blobId: req.blobId }),
    async dispatch(device, req, action, signal) {
      await mkdir(stagingDir, { recursive: true, mode: 0o700 });
      const local = join(stagingDir, `install-${randomUUID()}.apk`);
      try {
        try {
          await getBlob(transport, req.blobId, local, signal);
        } catch (err) {
          throw new DispatchFailure(`could not fetch the APK: ${(err as Error).message}`, false, "BLOB_UNAVAILABLE");
        }
        const remote = `/data/local/tmp/farm-install-${action.actionId}.apk`;
        try {
          const transfer = await client.getDevice(device.serial).push(local, remote);
          await new Promise<void>((resolve, reject) => {
            transfer.once("end", () => resolve());
            transfer.once("error", reject);
            signal.addEventListener("abort", () => reject(new Error("deadline exceeded")), { once: true });
          });
        } catch (err) {
          // A partial push changes nothing that matters; the package is not installed.
          throw new DispatchFailure(`pushing the APK failed: ${(err as Error).message}`, false, "INSTALL_PUSH_FAILED");
        }
        let r;
        try {
          r = await shellV2(adb, device.serial, `pm install -r ${shQuote(remote)}`, signal);
        } catch (err) {
          throw toDispatchFailure(err);
        } finally {
          await shellV2(adb, device.serial, `rm -f ${shQuote(remote)}`).catch(() => undefined);
        }
        const output = (r.stdout.toString("utf8") + r.stderr.toString("utf8")).trim();
        if (r.exitCode !== 0 || !/^Success/m.test(output)) {
          throw new ActionFailed(`install failed: ${output.slice(0, 500)}`, "INSTALL_FAILED", { exitCode: r.exitCode, output: output.slice(0, 2000) });
        }
        return { result: { output }, receipt: { exitCode: 0, output: output.slice(0, 2000), provenBy: "pm install output" } };
      } finally {
        await rm(local, { force: true });
      }
    },
    prove: async () => undefined,
  };
}

