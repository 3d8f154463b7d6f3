import { randomUUID } from "node:crypto";
import { mkdir, rm } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Transport } from "@connectrpc/connect";
import { DEVICE_FILE_MAX_BYTES } from "@farm/shared/device-files";
import { Errors, farmError } from "@farm/shared/errors";
import { createAdbClient, type AdbServerAddress } from "../adb/adb-client.js";
import { putBlob } from "../uplink/blob-transfer.js";
import { pullRemoteFile } from "../video/remote-pull.js";

const S_IFMT = 0o170000;
const S_IFREG = 0o100000;

export interface PullFileDeps {
  adb: AdbServerAddress;
  transport: Transport;
  stagingDir: string;
}

/**
 * PullFile: a read. The file's size is read first (adb sync STAT) and one
 * past the limit is refused before a byte of it moves; then it is pulled
 * into a 0600 staging file and put in the coordinator's blob store (sha256
 * checked there), for the caller to download.
 */
export async function pullFile(serial: string, path: string, deadlineMs: number, deps: PullFileDeps): Promise<{ blobId: string; size: number; sha256: string }> {
  const device = createAdbClient(deps.adb).getDevice(serial);
  let stats: { mode: number; size: number };
  try {
    stats = await device.stat(path);
  } catch (err) {
    // adbkit answers STAT's mode 0 (no such path) with an ENOENT error of its own, not with the stats.
    if ((err as { code?: unknown }).code === "ENOENT") throw farmError(Errors.NOT_FOUND, `no file ${path} on the phone`, "path");
    throw farmError(Errors.FILE_TRANSFER_FAILED, `could not read ${path}: ${(err as Error).message}`, "path");
  }
  // adb's STAT answers a missing path with mode 0.
  if ((stats.mode & S_IFMT) !== S_IFREG) throw farmError(Errors.NOT_FOUND, stats.mode === 0 ? `no file ${path} on the phone` : `${path} is not a regular file`, "path");
  if (stats.size > DEVICE_FILE_MAX_BYTES) throw farmError(Errors.FILE_TOO_LARGE, `${path} is ${stats.size} bytes; files pulled are at most ${DEVICE_FILE_MAX_BYTES}`, "path");
  await mkdir(deps.stagingDir, { recursive: true, mode: 0o700 });
  const local = join(deps.stagingDir, `pull-${randomUUID()}`);
  try {
    let bytes: number;
    try {
      ({ bytes } = await pullRemoteFile(deps.adb, serial, path, local, Math.max(1, deadlineMs - Date.now())));
    } catch (err) {
      throw farmError(Errors.FILE_TRANSFER_FAILED, `pulling ${path} failed: ${(err as Error).message}`, "path");
    }
    // It may have grown since its size was read.
    if (bytes > DEVICE_FILE_MAX_BYTES) throw farmError(Errors.FILE_TOO_LARGE, `${path} grew past ${DEVICE_FILE_MAX_BYTES} bytes while it was pulled`, "path");
    return await putBlob(deps.transport, local, basename(path));
  } finally {
    await rm(local, { force: true });
  }
}
