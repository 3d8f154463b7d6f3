import { randomBytes } from "node:crypto";
import { StringDecoder } from "node:string_decoder";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { openDeviceService } from "../adb/adb-service.js";
import { shellV2 } from "../adb/adb-shell.js";
import { isStepMarkerLine, STEP_MARK_TAG, stepMarkerMessage } from "./step-markers.js";

/** What a step's log may hold before it is cut (the rest is dropped, and the artifact says so). */
export const DEVICE_LOG_MAX_BYTES = 16 * 1024 * 1024;
/** How long `stop` waits for the end marker before it gives up (then kills the stream). */
const STOP_WAIT_MS = 10_000;
const MARK_WAIT_MS = 3_000;

/** The log of one step's window, or why there is none. */
export interface DeviceLogResult {
  /** The lines logged between the two markers (threadtime format). */
  text?: string;
  /** Set when the window could not be closed cleanly: the log is then dropped. */
  warning?: string;
  /** Set when the log was cut at DEVICE_LOG_MAX_BYTES (kept, and said). */
  truncated?: boolean;
}

export interface DeviceLogInterval {
  /** Closes the window (end marker, then the stream) and returns its lines. */
  stop(): Promise<DeviceLogResult>;
}

/**
 * The device log around one step: `logcat -T 1` follows the log from now,
 * and a begin and an end marker written with Android's `log` tool bound the
 * step's window exactly: lines from before the action (the one `-T 1`
 * repeats) are not in it, and every line logged during the action has been
 * read once the end marker arrives (no guessing with a sleep).
 */
export async function startDeviceLog(adb: AdbServerAddress, serial: string, opts: { filterspec: string; package: string; untilMs: number }): Promise<DeviceLogInterval> {
  const id = randomBytes(6).toString("hex");
  const begin = stepMarkerMessage("begin", id);
  const end = stepMarkerMessage("end", id);
  const remaining = () => Math.max(1, opts.untilMs - Date.now());
  let pid = "";
  if (opts.package) {
    const r = await shellV2(adb, serial, `pidof ${opts.package}`, AbortSignal.timeout(remaining()));
    pid = r.stdout.toString("utf8").trim().split(/\s+/)[0] ?? "";
  }
  // The markers' tag is always let through, whatever the filterspec says.
  const specs = [...opts.filterspec.split(/\s+/).filter(Boolean), `${STEP_MARK_TAG}:V`];
  const { socket, leftover } = await openDeviceService(adb, serial, `exec:logcat -v threadtime -T 1 ${specs.join(" ")}`, AbortSignal.timeout(remaining()));
  const decoder = new StringDecoder("utf8");
  let text = decoder.write(leftover);
  let bytes = leftover.length;
  let truncated = false;
  let closed = false;
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of waiters) w();
  };
  // Past the cap, lines are no longer kept, but the end marker is still looked for.
  let tail = "";
  let endSeen = false;
  socket.on("data", (chunk: Buffer) => {
    bytes += chunk.length;
    const piece = decoder.write(chunk);
    if (bytes > DEVICE_LOG_MAX_BYTES) truncated = true;
    else text += piece;
    tail = (tail + piece).slice(-4096);
    if (tail.includes(end)) endSeen = true;
    wake();
  });
  socket.on("close", () => {
    closed = true;
    wake();
  });
  socket.on("error", () => undefined);
  /** Waits until `mark` has been read, the stream ends or `ms` pass. */
  const seen = (mark: string, ms: number) =>
    new Promise<boolean>((resolve) => {
      const has = () => (mark === end ? endSeen : text.includes(mark));
      const check = () => {
        if (has()) return done(true);
        if (closed) return done(false);
      };
      const timer = setTimeout(() => done(has()), ms);
      function done(v: boolean) {
        clearTimeout(timer);
        waiters.delete(check);
        resolve(v);
      }
      waiters.add(check);
      check();
    });
  const mark = async (what: string) => {
    await shellV2(adb, serial, `log -t ${STEP_MARK_TAG} -p i '${what} ${id}'`, AbortSignal.timeout(Math.min(MARK_WAIT_MS, remaining())));
  };
  try {
    await mark("begin");
  } catch (err) {
    socket.destroy();
    throw err;
  }
  // The action starts only once the log is known to be followed from here.
  const started = await seen(begin, MARK_WAIT_MS);

  return {
    async stop() {
      try {
        try {
          await mark("end");
        } catch (err) {
          return { warning: `the end of the step's log could not be marked (${(err as Error).message}); the log is dropped` };
        }
        if (!(await seen(end, STOP_WAIT_MS))) {
          return { warning: closed ? "the log stream ended before the step's end (the phone went away?); the log is dropped" : `the end of the step's log did not arrive within ${STOP_WAIT_MS / 1000} s; the log is dropped` };
        }
        if (!started && !text.includes(begin)) return { warning: "the start of the step's log was never seen; the log is dropped" };
        const from = text.indexOf("\n", text.indexOf(begin)) + 1;
        const endAt = text.indexOf(end);
        const to = endAt < 0 ? text.lastIndexOf("\n") + 1 : text.lastIndexOf("\n", endAt) + 1;
        let lines = text.slice(from, Math.max(from, to)).split("\n").filter((l) => l !== "" && !isStepMarkerLine(l));
        // threadtime: "MM-DD HH:MM:SS.mmm  PID  TID P TAG: message".
        if (pid) lines = lines.filter((l) => l.split(/\s+/)[2] === pid);
        return { text: lines.length > 0 ? `${lines.join("\n")}\n` : "", ...(truncated ? { truncated: true } : {}) };
      } finally {
        socket.destroy();
      }
    },
  };
}
