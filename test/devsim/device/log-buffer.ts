/** Android log priorities: V D I W E F. */
export const PRIORITY_LETTERS = ["", "", "V", "D", "I", "W", "E", "F", "S"] as const;

export interface LogEntry {
  /** ms since the epoch */
  time: number;
  pid: number;
  tid: number;
  uid: number;
  priority: number;
  tag: string;
  message: string;
}

/**
 * The main log buffer behind `logcat`: bounded, with live subscribers for
 * `logcat` without -d.
 */
export class LogBuffer {
  private entries: LogEntry[] = [];
  private readonly listeners = new Set<(entry: LogEntry) => void>();

  constructor(private readonly capacity = 5000) {
    this.add({ pid: 1, priority: 4, tag: "init", message: "starting service 'adbd'..." });
    this.add({ pid: 1, priority: 4, tag: "ActivityManager", message: "System now ready" });
  }

  add(entry: Omit<LogEntry, "time" | "tid" | "uid"> & Partial<Pick<LogEntry, "time" | "tid" | "uid">>): void {
    const full: LogEntry = { time: Date.now(), tid: entry.pid, uid: 1000, ...entry };
    this.entries.push(full);
    if (this.entries.length > this.capacity) this.entries.splice(0, this.entries.length - this.capacity);
    for (const listener of this.listeners) listener(full);
  }

  list(): LogEntry[] {
    return [...this.entries];
  }

  clear(): void {
    this.entries = [];
  }

  subscribe(listener: (entry: LogEntry) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
