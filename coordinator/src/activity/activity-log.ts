import { toErrorReport } from "@farm/shared/errors";
import { decodePageToken, pageSizeOf, readPage, type Page, type PageRequest } from "../paging.js";
import type { ActivityEntry, ActivityFilter, ActivityRow, ActivityStore, OutcomeCount } from "./activity-store.js";

export type { ActivityEntry, ActivityRow } from "./activity-store.js";

/** What a routed call fills in as it goes; the log adds the time, outcome and duration. */
export type TrackedEntry = Omit<ActivityRow, "id" | "at" | "outcome" | "durationMs">;

/** Every routed action: who, with which lease, on which device, what happened. */
export class ActivityLog {
  private readonly listeners = new Set<(row: ActivityRow) => void>();
  private readonly failureListeners = new Set<(err: unknown, command: string) => void>();

  constructor(private readonly store: ActivityStore) {}

  /**
   * Stores an entry, then tells the listeners. Entries written at once may
   * reach listeners out of id order (each is told once its own write is done).
   */
  async record(entry: ActivityEntry): Promise<ActivityRow> {
    const row = await this.store.insert(entry);
    for (const fn of this.listeners) fn(row);
    return row;
  }

  /**
   * Stores an entry written after the fact (a call already answered or
   * ending): a failed write is told to the failure listeners (logged and
   * counted), never thrown, so history never changes what a caller is told.
   */
  async recordAfter(entry: ActivityEntry): Promise<void> {
    try {
      await this.record(entry);
    } catch (err) {
      for (const fn of this.failureListeners) fn(err, entry.command);
    }
  }

  /** Calls fn with every entry that could not be written (the coordinator logs it, the metrics count it). */
  onRecordFailure(fn: (err: unknown, command: string) => void): void {
    this.failureListeners.add(fn);
  }

  /** Calls fn with every entry recorded from now on (live watchers, metrics). */
  onRecord(fn: (row: ActivityRow) => void): void {
    this.listeners.add(fn);
  }

  /** Stops calling fn (a watcher's wiring, when the last watcher leaves). */
  offRecord(fn: (row: ActivityRow) => void): void {
    this.listeners.delete(fn);
  }

  /** How many are told of each entry. */
  get listenerCount(): number {
    return this.listeners.size;
  }

  /** One stored entry, or undefined; listeners are not told (the replica that stored it told its own). */
  get(id: number): Promise<ActivityRow | undefined> {
    return this.store.get(id);
  }

  /** Entries per command and outcome, over the whole log. */
  countByOutcome(): Promise<OutcomeCount[]> {
    return this.store.countByOutcome();
  }

  /**
   * Runs a routed call and records it whatever its outcome. The call fills
   * in what routing learns (physical id, agent, lease) on the entry it gets.
   * The entry is stored before the caller is answered.
   */
  async track<T>(entry: TrackedEntry, run: (entry: TrackedEntry) => Promise<T>): Promise<T> {
    const t0 = Date.now();
    let outcome: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: await run(entry) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    // History is written after the fact and never changes what the caller
    // is told: a full disk here must not turn a done action into an error.
    await this.recordAfter({ ...entry, at: t0, outcome: outcome.ok ? "ok" : toErrorReport(outcome.error).code, durationMs: Date.now() - t0 });
    if (outcome.ok) return outcome.value;
    throw outcome.error;
  }

  /** One page, newest first; the key is the id (unique, and ascending with time of writing). */
  async listPage(filter: ActivityFilter, page: PageRequest): Promise<Page<ActivityRow>> {
    const serial = filter.serial || undefined;
    const sinceMs = filter.sinceMs || undefined;
    const scope = { list: "activity", filter: { serial, sinceMs } };
    const shape = ["number"] as const;
    // A bad token or size is refused before the store is read; readPage then cuts the page from the rows read.
    const size = pageSizeOf(page.pageSize);
    const after = decodePageToken(page.pageToken, scope, shape);
    const rows = await this.store.listBefore({ serial, sinceMs }, after?.[0], size + 1);
    return readPage(page, scope, shape, (row: ActivityRow) => [row.id] as const, () => rows);
  }
}
