import type { LogLine } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { execOut } from "../adb/adb-exec.js";
import { openDeviceService } from "../adb/adb-service.js";
import { LogLineSplitter } from "./logcat-lines.js";
import { PidPackages, PS_MAX_BYTES } from "./pid-packages.js";

/** Lines of the log shown to a viewer that joins: the coordinator keeps as many. */
export const LOGCAT_BACKLOG_LINES = 500;
/** Lines sent in one message at most. */
export const LOGCAT_BATCH_LINES = 256;

export interface LogcatSourceOptions {
  adb: AdbServerAddress;
  serial: string;
  /** Sends lines on; waiting on it is how a slow coordinator slows the read (adb's own flow control then holds the phone's side). */
  emit: (lines: LogLine[]) => Promise<void>;
  signal: AbortSignal;
}

/**
 * Follows a phone's log (`logcat -v threadtime -T N`: the last N lines,
 * then every new one) until `signal` aborts or the phone's stream ends.
 * Each line carries the package of the app that wrote it (pid-packages.ts).
 * Reads only; nothing on the phone changes.
 */
export async function runLogcat(opts: LogcatSourceOptions): Promise<void> {
  const { socket, leftover } = await openDeviceService(opts.adb, opts.serial, `exec:logcat -v threadtime -T ${LOGCAT_BACKLOG_LINES}`, opts.signal);
  const splitter = new LogLineSplitter();
  const packages = new PidPackages(async (signal) => {
    const r = await execOut(opts.adb, opts.serial, "ps -A -o PID,NAME", { signal, maxBytes: PS_MAX_BYTES });
    if (r.error) throw r.error;
    return r.bytes.toString("utf8");
  });
  const stop = () => socket.destroy();
  opts.signal.addEventListener("abort", stop, { once: true });
  try {
    await new Promise<void>((resolve, reject) => {
      let chain = Promise.resolve();
      const deliver = (lines: LogLine[]) => {
        if (lines.length === 0) return;
        socket.pause();
        chain = chain
          .then(async () => {
            await packages.label(lines, opts.signal);
            for (let i = 0; i < lines.length; i += LOGCAT_BATCH_LINES) await opts.emit(lines.slice(i, i + LOGCAT_BATCH_LINES));
          })
          .then(() => void socket.resume(), (err: unknown) => {
            socket.destroy();
            reject(err as Error);
          });
      };
      socket.on("data", (chunk: Buffer) => deliver(splitter.push(chunk)));
      socket.on("error", () => undefined); // "close" follows
      socket.on("close", () => {
        deliver(splitter.flush());
        void chain.then(resolve, reject);
      });
      if (leftover.length > 0) deliver(splitter.push(leftover));
    });
  } finally {
    opts.signal.removeEventListener("abort", stop);
    socket.destroy();
  }
}
