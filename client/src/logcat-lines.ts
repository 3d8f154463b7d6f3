import { Errors } from "@farm/shared/error-codes";
import type { LogLine, WatchLogcatResponse } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import { FarmError } from "./farm-error.js";
import { toFarmError } from "./to-farm-error.js";

const LEVELS = "VDIWEF";

/** Which lines Device.logcat yields; every given field must match. */
export interface LogcatOptions {
  /** The lowest level: V, D, I, W, E or F (a line of no known level, such as a buffer banner, always passes). */
  level?: "V" | "D" | "I" | "W" | "E" | "F" | undefined;
  /** A tag, or any of several tags, exactly (as `logcat -s TAG`). */
  tag?: string | readonly string[] | undefined;
  /** The package of the app that wrote the line, exactly (lines of no known package never match). */
  package?: string | undefined;
}

/**
 * One logcat line (threadtime, parsed): the fields of the protocol's
 * LogLine (time, pid, tid, level, tag, message, package), and how many
 * lines the coordinator dropped for this reader just before it.
 */
export type LogcatLine = Omit<LogLine, "$typeName" | "$unknown"> & {
  /** Lines missed because the reader fell behind (0 normally): the log is not whole here. */
  droppedBefore: number;
};

/** The options as a line test, refused (INVALID_ARGUMENT with the field) before any call is made. */
export function logcatFilter(opts: LogcatOptions): (l: LogLine) => boolean {
  const level = opts.level ?? "V";
  if (typeof level !== "string" || level.length !== 1 || !LEVELS.includes(level)) throw new FarmError(Errors.INVALID_ARGUMENT, `level must be one of V, D, I, W, E, F, got ${JSON.stringify(level)}`, "level");
  const tags = opts.tag === undefined ? undefined : new Set(typeof opts.tag === "string" ? [opts.tag] : opts.tag);
  if (tags && (tags.size === 0 || [...tags].some((t) => typeof t !== "string" || t === ""))) throw new FarmError(Errors.INVALID_ARGUMENT, "tag must be a non-empty string or a non-empty list of them", "tag");
  if (opts.package !== undefined && (typeof opts.package !== "string" || opts.package === "")) throw new FarmError(Errors.INVALID_ARGUMENT, "package must be a non-empty string", "package");
  const least = LEVELS.indexOf(level);
  return (l) => {
    const at = l.level ? LEVELS.indexOf(l.level) : -1;
    if (at >= 0 && at < least) return false;
    if (tags && !tags.has(l.tag)) return false;
    return opts.package === undefined || l.package === opts.package;
  };
}

/**
 * The stream's batches as single lines, read only as the consumer asks
 * (no queue of our own: the HTTP/2 window and the coordinator's
 * per-reader drop bound what waits). The caller's abort ends it quietly;
 * a `break` closes the stream; any other end of the stream is a FarmError.
 */
export async function* logcatLines(open: () => AsyncIterable<WatchLogcatResponse>, keep: (l: LogLine) => boolean, signal: AbortSignal | undefined): AsyncGenerator<LogcatLine> {
  if (signal?.aborted) return;
  let dropped = 0;
  try {
    for await (const batch of open()) {
      dropped += batch.dropped;
      for (const l of batch.lines) {
        if (!keep(l)) continue;
        yield { time: l.time, pid: l.pid, tid: l.tid, level: l.level, tag: l.tag, message: l.message, package: l.package, droppedBefore: dropped };
        dropped = 0;
        if (signal?.aborted) return;
      }
    }
  } catch (err) {
    if (signal?.aborted) return;
    throw toFarmError(err);
  }
}
