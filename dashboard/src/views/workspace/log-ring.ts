import type { LogLine } from "@farm/shared/gen/farm/v1/logcat_service_pb";

/** Lines the Logs tab keeps in the browser: the oldest go first. */
export const LOG_RING_LINES = 5_000;

/** The Logs tab's filters: lowest level shown, tag, package, and a search of the whole line. */
export interface LogFilter {
  /** V, D, I, W, E or F: this level and above. */
  level: string;
  /** Case-insensitive part of the tag (empty: every tag). */
  tag: string;
  /**
   * Case-insensitive part of the package of the app that wrote the line (the
   * agent tells it from the line's pid); empty: every line. A line of no
   * known package (a system daemon's) is hidden by any package filter.
   */
  package: string;
  /** Case-insensitive part of the tag or message (empty: every line). */
  search: string;
}

const LEVELS = "VDIWEF";

/** Whether a line passes the filter (a line of no known level, such as a buffer banner, passes any level). */
export function matches(line: LogLine, f: LogFilter): boolean {
  const at = line.level ? LEVELS.indexOf(line.level) : -1;
  if (at >= 0 && at < LEVELS.indexOf(f.level)) return false;
  if (f.tag && !line.tag.toLowerCase().includes(f.tag.toLowerCase())) return false;
  if (f.package && !line.package.toLowerCase().includes(f.package.toLowerCase())) return false;
  if (f.search) {
    const q = f.search.toLowerCase();
    if (!line.message.toLowerCase().includes(q) && !line.tag.toLowerCase().includes(q)) return false;
  }
  return true;
}

/** A line as logcat printed it (threadtime), for the download. */
export function lineText(l: LogLine): string {
  if (!l.level) return l.message;
  return `${l.time} ${String(l.pid).padStart(5)} ${String(l.tid).padStart(5)} ${l.level} ${l.tag}: ${l.message}`;
}

/** The newest LOG_RING_LINES lines, in order. */
export class LogRing {
  private lines: LogLine[] = [];
  /** Lines pushed out of the ring so far. */
  evicted = 0;

  constructor(private readonly capacity = LOG_RING_LINES) {}

  /** Adds lines; returns how many of the oldest were let go. */
  push(lines: readonly LogLine[]): number {
    this.lines.push(...lines);
    const over = this.lines.length - this.capacity;
    if (over <= 0) return 0;
    this.lines.splice(0, over);
    this.evicted += over;
    return over;
  }

  all(): readonly LogLine[] {
    return this.lines;
  }

  get size(): number {
    return this.lines.length;
  }

  clear(): void {
    this.lines = [];
  }
}
