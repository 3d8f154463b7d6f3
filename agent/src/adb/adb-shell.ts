import type { AdbServerAddress } from "./adb-client.js";
import { AdbServiceError, openDeviceService } from "./adb-service.js";

export { AdbServiceError as AdbShellError } from "./adb-service.js";

export interface ShellResult {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
  /** True when output beyond the cap was dropped. */
  truncated: boolean;
}

const OUTPUT_CAP = 1024 * 1024;

/** Hooks for callers that must know how far a command got if it fails midway. */
export interface ShellWatch {
  /** The device accepted the shell service: the command is running. */
  onOpen?(): void;
  /** Each stdout packet as it arrives (before the cap applies). */
  onStdout?(data: Buffer): void;
}

/**
 * Runs `command` with adb's shell protocol v2 (exit status, separate
 * stdout/stderr): adbkit only speaks the v1 shell, which has no exit status.
 */
export async function shellV2(addr: AdbServerAddress, serial: string, command: string, signal?: AbortSignal, watch?: ShellWatch): Promise<ShellResult> {
  const { socket, leftover } = await openDeviceService(addr, serial, `shell,v2,raw:${command}`, signal);
  watch?.onOpen?.();
  return new Promise((resolve, reject) => {
    let buf: Buffer = leftover;
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let errBytes = 0;
    let truncated = false;
    let exitCode: number | undefined;
    let settled = false;
    const finish = (e: AdbServiceError | undefined) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      socket.destroy();
      if (e) reject(e);
      else resolve({ exitCode: exitCode ?? -1, stdout: Buffer.concat(out), stderr: Buffer.concat(err), truncated });
    };
    const onAbort = () => finish(new AdbServiceError("deadline exceeded", "accepted", "DEADLINE_EXCEEDED"));
    if (signal?.aborted) return onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
    const parse = () => {
      while (buf.length >= 5) {
        const id = buf[0] as number;
        const len = buf.readUInt32LE(1);
        if (buf.length < 5 + len) return;
        const data = buf.subarray(5, 5 + len);
        buf = buf.subarray(5 + len);
        if (id === 1) watch?.onStdout?.(data);
        if (id === 1 || id === 2) {
          const total = id === 1 ? (outBytes += data.length) : (errBytes += data.length);
          if (total <= OUTPUT_CAP) (id === 1 ? out : err).push(Buffer.from(data));
          else truncated = true;
        } else if (id === 3) {
          exitCode = data[0] ?? -1;
        }
      }
    };
    socket.on("data", (chunk: Buffer) => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      parse();
    });
    socket.on("error", (e) => finish(new AdbServiceError(`adb connection failed: ${e.message}`, "accepted", "ADB_CONNECTION_LOST")));
    socket.on("close", () => {
      if (exitCode !== undefined) return finish(undefined);
      finish(new AdbServiceError("the connection closed before the command reported its exit status", "accepted", "ADB_CONNECTION_LOST"));
    });
    // No stdin: tell the device at once, as adb does for a non-tty stdin.
    socket.write(Buffer.from([4, 0, 0, 0, 0]));
    parse();
  });
}
