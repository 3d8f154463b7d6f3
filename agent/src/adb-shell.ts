import { connect, type Socket } from "node:net";
import type { AdbServerAddress } from "./adb-client.js";

export interface ShellResult {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
  /** True when output beyond the cap was dropped. */
  truncated: boolean;
}

/**
 * Where a failed shell call stopped: "before" the command could reach the
 * device (it was not dispatched), "sent" after the request left but before
 * the device accepted it (unknown), or "accepted" after the device took it
 * (dispatched, outcome unknown).
 */
export type ShellPhase = "before" | "sent" | "accepted";

export class AdbShellError extends Error {
  constructor(
    message: string,
    readonly phase: ShellPhase,
    readonly code: "DEVICE_OFFLINE" | "DEADLINE_EXCEEDED" | "ADB_CONNECTION_LOST" | "ADB_REFUSED",
  ) {
    super(message);
    this.name = "AdbShellError";
  }
}

const OUTPUT_CAP = 1024 * 1024;

/**
 * Runs `command` with adb's shell protocol v2 (exit status, separate
 * stdout/stderr), talking to the adb server directly: adbkit only speaks the
 * v1 shell, which has no exit status.
 */
export function shellV2(addr: AdbServerAddress, serial: string, command: string, signal?: AbortSignal): Promise<ShellResult> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect({ host: addr.host, port: addr.port });
    socket.setNoDelay(true);
    let phase: ShellPhase = "before";
    let stage: "transport" | "service" | "stream" = "transport";
    let buf: Buffer = Buffer.alloc(0);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let errBytes = 0;
    let truncated = false;
    let exitCode: number | undefined;
    let settled = false;

    const finish = (e: AdbShellError | undefined) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      socket.destroy();
      if (e) reject(e);
      else resolve({ exitCode: exitCode ?? -1, stdout: Buffer.concat(out), stderr: Buffer.concat(err), truncated });
    };
    const onAbort = () => finish(new AdbShellError("deadline exceeded", phase, "DEADLINE_EXCEEDED"));
    if (signal?.aborted) return onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });

    const request = (text: string) => socket.write(text.length.toString(16).padStart(4, "0") + text);
    socket.once("connect", () => request(`host:transport:${serial}`));
    socket.on("error", (e) => finish(new AdbShellError(`adb server connection failed: ${e.message}`, phase, "ADB_CONNECTION_LOST")));
    socket.on("close", () => {
      if (exitCode !== undefined) return finish(undefined);
      finish(new AdbShellError("the connection closed before the command reported its exit status", phase, "ADB_CONNECTION_LOST"));
    });
    socket.on("data", (chunk: Buffer) => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      while (!settled) {
        if (stage !== "stream") {
          if (buf.length < 4) return;
          const status = buf.subarray(0, 4).toString("latin1");
          if (status === "FAIL") {
            if (buf.length < 8) return;
            const n = Number.parseInt(buf.subarray(4, 8).toString("latin1"), 16);
            if (buf.length < 8 + n) return;
            const msg = buf.subarray(8, 8 + n).toString("utf8");
            // A refusal by the server means the command never reached the device.
            return finish(new AdbShellError(`adb: ${msg}`, "before", /offline|not found|no devices/i.test(msg) ? "DEVICE_OFFLINE" : "ADB_REFUSED"));
          }
          if (status !== "OKAY") return finish(new AdbShellError(`unexpected adb reply ${JSON.stringify(status)}`, phase, "ADB_CONNECTION_LOST"));
          buf = buf.subarray(4);
          if (stage === "transport") {
            stage = "service";
            request(`shell,v2,raw:${command}`);
            phase = "sent";
          } else {
            stage = "stream";
            phase = "accepted";
            // No stdin: tell the device at once, as adb does for a non-tty stdin.
            socket.write(Buffer.from([4, 0, 0, 0, 0]));
          }
          continue;
        }
        if (buf.length < 5) return;
        const id = buf[0] as number;
        const len = buf.readUInt32LE(1);
        if (buf.length < 5 + len) return;
        const data = buf.subarray(5, 5 + len);
        buf = buf.subarray(5 + len);
        if (id === 1) {
          if (outBytes + data.length <= OUTPUT_CAP) out.push(Buffer.from(data));
          else truncated = true;
          outBytes += data.length;
        } else if (id === 2) {
          if (errBytes + data.length <= OUTPUT_CAP) err.push(Buffer.from(data));
          else truncated = true;
          errBytes += data.length;
        } else if (id === 3) {
          exitCode = data[0] ?? -1;
        }
      }
    });
  });
}
