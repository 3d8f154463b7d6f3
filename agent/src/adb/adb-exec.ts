import type { AdbServerAddress } from "./adb-client.js";
import { AdbServiceError, openDeviceService } from "./adb-service.js";

export interface ExecResult {
  bytes: Buffer;
  /** Set when the transfer did not end normally; `bytes` is then partial. */
  error?: AdbServiceError;
}

/**
 * Runs an `exec:` service (raw bytes, no PTY, no framing) and collects its
 * output up to `maxBytes`. Failures keep what arrived, so a capture cut short
 * by a deadline or a vanished device still has its partial bytes.
 */
export async function execOut(addr: AdbServerAddress, serial: string, command: string, opts: { signal?: AbortSignal; maxBytes: number }): Promise<ExecResult> {
  let opened;
  try {
    opened = await openDeviceService(addr, serial, `exec:${command}`, opts.signal);
  } catch (err) {
    return { bytes: Buffer.alloc(0), error: err as AdbServiceError };
  }
  const { socket, leftover } = opened;
  return new Promise((resolve) => {
    const chunks: Buffer[] = leftover.length > 0 ? [leftover] : [];
    let total = leftover.length;
    let settled = false;
    const finish = (error?: AdbServiceError) => {
      if (settled) return;
      settled = true;
      opts.signal?.removeEventListener("abort", onAbort);
      socket.destroy();
      resolve({ bytes: Buffer.concat(chunks), ...(error ? { error } : {}) });
    };
    const onAbort = () => finish(new AdbServiceError("deadline exceeded", "accepted", "DEADLINE_EXCEEDED"));
    if (opts.signal?.aborted) return onAbort();
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    if (total > opts.maxBytes) return finish(new AdbServiceError(`output exceeds ${opts.maxBytes} bytes`, "accepted", "OUTPUT_TOO_LARGE"));
    socket.on("data", (chunk: Buffer) => {
      total += chunk.length;
      if (total > opts.maxBytes) {
        chunks.push(chunk.subarray(0, chunk.length - (total - opts.maxBytes)));
        return finish(new AdbServiceError(`output exceeds ${opts.maxBytes} bytes`, "accepted", "OUTPUT_TOO_LARGE"));
      }
      chunks.push(chunk);
    });
    socket.on("end", () => finish());
    socket.on("error", (e) => finish(new AdbServiceError(`adb connection failed: ${e.message}`, "accepted", "ADB_CONNECTION_LOST")));
    socket.on("close", () => finish());
  });
}
