import { randomUUID } from "node:crypto";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Transport } from "@connectrpc/connect";
import { DEVICE_FILE_MAX_BYTES } from "@farm/shared/device-files";
import { Errors } from "@farm/shared/errors";
import type { AdbClient } from "../adb/adb-client.js";
import { ActionFailed, DispatchFailure, type ActionKind } from "../ownership/device-ownership.js";
import { getBlob } from "../uplink/blob-transfer.js";
import type { DeviceJobs } from "./device-job.js";
import { shQuote } from "./shell-quote.js";
import { pushToDevice } from "./push-to-device.js";

export interface PushFileRequest {
  blobId: string;
  /** Checked by checkDeviceFilePath before the action is journaled. */
  path: string;
}

export interface PushFileResult {
  size: number;
  sha256: string;
}

/**
 * PushFile: the file comes from the coordinator's blob store (checked by
 * sha256), is pushed beside the device job store and moved into place by a
 * device job that also hashes what landed, so the outcome is provable and
 * the bytes at the path are known to be the blob's. Nothing reaches the
 * phone before the file is whole on the agent and within the size limit.
 */
export function pushFileAction(jobs: DeviceJobs, client: AdbClient, transport: Transport, stagingDir: string): ActionKind<PushFileRequest, PushFileResult> {
  return {
    kind: "push-file",
    journalRequest: (req) => ({ blobId: req.blobId, path: req.path }),
    async dispatch(device, req, action, signal, progress) {
      await mkdir(stagingDir, { recursive: true, mode: 0o700 });
      const local = join(stagingDir, `push-${randomUUID()}`);
      try {
        let blob: { size: number; sha256: string };
        try {
          blob = await getBlob(transport, req.blobId, local, signal);
        } catch (err) {
          throw new DispatchFailure(`could not fetch the file: ${(err as Error).message}`, false, Errors.BLOB_UNAVAILABLE);
        }
        if (blob.size > DEVICE_FILE_MAX_BYTES) throw new DispatchFailure(`the file is ${blob.size} bytes; files pushed are at most ${DEVICE_FILE_MAX_BYTES}`, false, Errors.FILE_TOO_LARGE);
        const staged = `/data/local/tmp/farm-push-${action.actionId}`;
        try {
          await pushToDevice(client.getDevice(device.serial), local, staged, signal);
        } catch (err) {
          // A partial file in the staging place changes nothing at the path.
          throw new DispatchFailure(`pushing the file failed: ${(err as Error).message}`, false, Errors.FILE_TRANSFER_FAILED);
        }
        const dest = shQuote(req.path);
        const r = await jobs.run(device.serial, `mv -f ${shQuote(staged)} ${dest} && sha256sum ${dest}; farm_rc=$?; rm -f ${shQuote(staged)}; exit $farm_rc`, action, signal, progress);
        const out = r.stdout.toString("utf8").trim();
        const sha256 = /^([0-9a-f]{64})\s/.exec(out)?.[1] ?? "";
        if (r.exitCode !== 0 || !sha256) {
          throw new ActionFailed(`the file could not be put at ${req.path}: ${(r.stderr.toString("utf8") || out).trim().slice(0, 500)}`, Errors.FILE_TRANSFER_FAILED, { exitCode: r.exitCode });
        }
        if (sha256 !== blob.sha256) throw new ActionFailed(`the file at ${req.path} has sha256 ${sha256}, not the upload's ${blob.sha256}`, Errors.FILE_TRANSFER_FAILED, { exitCode: r.exitCode, sha256 });
        return { result: { size: blob.size, sha256 }, receipt: { exitCode: 0, size: blob.size, sha256, provenBy: r.provenBy, record: r.record } };
      } finally {
        await rm(local, { force: true });
      }
    },
    prove: (device, action, signal) => jobs.prove(device.serial, action, signal),
    acknowledge: (device, action) => jobs.acknowledge(device.serial, action),
  };
}
