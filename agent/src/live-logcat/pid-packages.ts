import type { LogLine } from "@farm/shared/gen/farm/v1/logcat_service_pb";

/** One read of the phone's process list at most this often: lines of a new pid that come sooner wait for it. */
export const PS_MIN_INTERVAL_MS = 250;
/** A read of the process list that takes longer is given up (the lines go on without a package). */
export const PS_TIMEOUT_MS = 3_000;
/** Bytes of `ps` output read at most (a phone lists about a thousand processes, some 40 KiB). */
export const PS_MAX_BYTES = 1 << 20;

/** Reads `ps -A -o PID,NAME` off the phone (the output, or a failure). */
export type ReadProcesses = (signal: AbortSignal) => Promise<string>;

/** An app's process is named after its package ("com.example.app", or "com.example.app:remote" for a second one); daemons are not. */
export function packageOfProcess(name: string): string {
  const base = name.split(":")[0] ?? "";
  return /^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$/.test(base) ? base : "";
}

/** toybox `ps -o PID,NAME` output: pid → package ("" for a process that is not an app's). */
export function parseProcesses(text: string): Map<number, string> {
  const out = new Map<number, string>();
  for (const line of text.split("\n")) {
    const m = /^\s*(\d+)\s+(\S+)/.exec(line);
    if (m) out.set(Number(m[1]), packageOfProcess(m[2] ?? ""));
  }
  return out;
}

/**
 * Which app wrote each log line, for the Logs tab's package filter: a map
 * of pid → package read off the phone, read again when a line comes from a
 * pid not seen before (at most once per PS_MIN_INTERVAL_MS). Each read
 * replaces the map (pids reused, and the map bounded by what `ps` lists);
 * a pid still unknown after a read (its process already gone) is kept as
 * no package until the next read. A read that fails leaves lines without
 * a package, never a guessed one.
 */
export class PidPackages {
  private known = new Map<number, string>();
  private lastRead = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly read: ReadProcesses,
    private readonly now: () => number = Date.now,
  ) {}

  /** Sets each line's package; reads the process list first when a line's pid is new. Calls are made one at a time (one stream's lines, in order). */
  async label(lines: LogLine[], signal: AbortSignal): Promise<void> {
    const fresh = lines.filter((l) => l.pid > 0 && !this.known.has(l.pid));
    if (fresh.length > 0) {
      const wait = this.lastRead + PS_MIN_INTERVAL_MS - this.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      this.lastRead = this.now();
      try {
        this.known = parseProcesses(await this.read(AbortSignal.any([signal, AbortSignal.timeout(PS_TIMEOUT_MS)])));
      } catch {
        if (signal.aborted) return;
        // Unknown stays unknown: these lines go without a package, and the next new pid reads again.
      }
      for (const l of fresh) if (!this.known.has(l.pid)) this.known.set(l.pid, "");
    }
    for (const l of lines) l.package = this.known.get(l.pid) ?? "";
  }

  /** Pids remembered now (tests). */
  get size(): number {
    return this.known.size;
  }
}
