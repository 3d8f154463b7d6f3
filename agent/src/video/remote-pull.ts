import { open, rm } from "node:fs/promises";
import { writeAll } from "@farm/shared/verified-file";
import { createAdbClient, type AdbServerAddress } from "../adb/adb-client.js";

/** A pull that failed after `bytes` bytes reached the local file (and were synced). */
export class PullError extends Error {
  constructor(
    message: string,
    readonly bytes: number,
  ) {
    super(message);
    this.name = "PullError";
  }
}

/**
 * Pulls one device file over adb sync into a new 0600 file, with a hard
 * deadline. Each chunk is written (every byte checked) before the next is
 * read, and the file is fsync'd whether the pull ends or fails, so the bytes
 * of a pull cut short (a vanished phone, the deadline) are all kept for the
 * manifest to list as partial. A failure before any byte leaves no file.
 */
export async function pullRemoteFile(adb: AdbServerAddress, serial: string, remote: string, local: string, deadlineMs: number): Promise<{ bytes: number }> {
  const signal = AbortSignal.timeout(deadlineMs);
  const fh = await open(local, "wx", 0o600);
  let written = 0;
  let failure: Error | undefined;
  try {
    const transfer = await createAdbClient(adb).getDevice(serial).pull(remote);
    await new Promise<void>((resolve, reject) => {
      let writing: Promise<void> = Promise.resolve();
      let settled = false;
      const settle = (err?: Error) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener("abort", onAbort);
        // What was received is written before the outcome is known.
        void writing.then(
          () => (err ? reject(err) : resolve()),
          (writeErr: Error) => reject(writeErr),
        );
      };
      const onAbort = () => {
        transfer.cancel();
        settle(new Error(`pull passed its ${deadlineMs / 1000} s deadline`));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      transfer.on("data", (chunk: Buffer) => {
        if (settled) return;
        transfer.pause();
        writing = writing
          .then(() => writeAll(fh, chunk, local))
          .then(() => {
            written += chunk.length;
            if (!settled) transfer.resume();
          });
        writing.catch((err: Error) => {
          transfer.cancel();
          settle(err);
        });
      });
      transfer.once("end", () => settle());
      transfer.once("error", (err: Error) => settle(err));
      if (signal.aborted) onAbort();
    });
  } catch (err) {
    failure = err as Error;
  } finally {
    await fh.sync().catch(() => undefined);
    await fh.close().catch(() => undefined);
  }
  if (failure) {
    if (written === 0) await rm(local, { force: true });
    throw new PullError(`${failure.message} (after ${written} bytes)`, written);
  }
  return { bytes: written };
}
