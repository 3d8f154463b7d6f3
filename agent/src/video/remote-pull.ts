import { createWriteStream } from "node:fs";
import { pipeline } from "node:stream/promises";
import { createAdbClient, type AdbServerAddress } from "../adb-client.js";

/**
 * Pulls one device file over adb sync into a new 0600 file, with a hard
 * deadline; on failure the bytes received so far stay for inspection.
 */
export async function pullRemoteFile(adb: AdbServerAddress, serial: string, remote: string, local: string, deadlineMs: number): Promise<{ bytes: number }> {
  const signal = AbortSignal.timeout(deadlineMs);
  const transfer = await createAdbClient(adb).getDevice(serial).pull(remote);
  let bytes = 0;
  transfer.on("progress", (p: { bytesTransferred: number }) => (bytes = p.bytesTransferred));
  const onAbort = () => transfer.cancel();
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    await pipeline(transfer, createWriteStream(local, { flags: "wx", mode: 0o600 }), { signal });
  } catch (err) {
    if (signal.aborted) throw new Error(`pull passed its ${deadlineMs / 1000} s deadline after ${bytes} bytes`);
    throw err;
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
  return { bytes };
}
