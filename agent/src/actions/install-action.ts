import { Errors } from "@farm/shared/errors";
import { randomUUID } from "node:crypto";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Transport } from "@connectrpc/connect";
import type { AdbClient } from "../adb/adb-client.js";
import { getBlob } from "../uplink/blob-transfer.js";
import { ActionFailed, DispatchFailure, type ActionKind } from "../ownership/device-ownership.js";
import { shQuote } from "./shell-quote.js";
import type { DeviceJobs } from "./device-job.js";
import { pushToDevice } from "./push-to-device.js";

export interface InstallRequest {
  blobId: string;
}

/**
 * `farm install`: the APK comes from the coordinator's blob store (checked by
 * sha256), is pushed to the phone and installed with `pm install -r`. Nothing
 * reaches the phone before the APK is whole on the agent.
 */
export function installAction(jobs: DeviceJobs, client: AdbClient, transport: Transport, stagingDir: string): ActionKind<InstallRequest, { output: string }> {
  return {
    kind: "install",
    journalRequest: (req) => ({ blobId: req.blobId }),
    async dispatch(device, req, action, signal, progress) {
      await mkdir(stagingDir, { recursive: true, mode: 0o700 });
      const local = join(stagingDir, `install-${randomUUID()}.apk`);
      try {
        try {
          await getBlob(transport, req.blobId, local, signal);
        } catch (err) {
          throw new DispatchFailure(`could not fetch the APK: ${(err as Error).message}`, false, Errors.BLOB_UNAVAILABLE);
        }
        const remote = `/data/local/tmp/farm-install-${action.actionId}.apk`;
        try {
          await pushToDevice(client.getDevice(device.serial), local, remote, signal);
        } catch (err) {
          // A partial push changes nothing that matters; the package is not installed.
          throw new DispatchFailure(`pushing the APK failed: ${(err as Error).message}`, false, Errors.INSTALL_PUSH_FAILED);
        }
        // pm runs as a device job; the APK is removed once pm is done with it.
        const r = await jobs.run(device.serial, `pm install -r ${shQuote(remote)}; farm_rc=$?; rm -f ${shQuote(remote)}; exit $farm_rc`, action, signal, progress);
        const output = (r.stdout.toString("utf8") + r.stderr.toString("utf8")).trim();
        if (r.exitCode !== 0 || !/^Success/m.test(output)) {
          throw new ActionFailed(`install failed: ${output.slice(0, 500)}`, Errors.INSTALL_FAILED, { exitCode: r.exitCode, output: output.slice(0, 2000) });
        }
        return { result: { output }, receipt: { exitCode: 0, output: output.slice(0, 2000), provenBy: r.provenBy, record: r.record } };
      } finally {
        await rm(local, { force: true });
      }
    },
    prove: (device, action, signal) => jobs.prove(device.serial, action, signal),
    acknowledge: (device, action) => jobs.acknowledge(device.serial, action),
  };
}
