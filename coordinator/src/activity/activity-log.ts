import { and, count, desc, eq, gte, lt, type SQL } from "drizzle-orm";
import { toErrorReport } from "@farm/shared/errors";
import type { CoordinatorDb } from "../db/open-database.js";
import { activity } from "../db/schema.js";
import { readPage, type Page, type PageRequest } from "../paging.js";

export type ActivityRow = typeof activity.$inferSelect;

/** Every routed action: who, with which lease, on which device, what happened. */
export class ActivityLog {
  private readonly listeners = new Set<(row: ActivityRow) => void>();

  constructor(private readonly db: CoordinatorDb) {}

  record(entry: Omit<ActivityRow, "id">): void {
    const row = this.db.insert(activity).values(entry).returning().get();
    for (const fn of this.listeners) fn(row);
  }

  /** Calls fn with every entry recorded from now on (live watchers, metrics). */
  onRecord(fn: (row: ActivityRow) => void): void {
    this.listeners.add(fn);
  }

  /** Entries per command and outcome, over the whole log. */
  countByOutcome(): { command: string; outcome: string; n: number }[] {
    return this.db
      .select({ command: activity.command, outcome: activity.outcome, n: count() })
      .from(activity)
      .groupBy(activity.command, activity.outcome)
      .all();
  }

  /**
   * Runs a routed call and records it whatever its outcome. The call fills
   * in what routing learns (physical id, agent, lease) on the entry it gets.
   */
  async track<T>(entry: Omit<ActivityRow, "id" | "at" | "outcome" | "durationMs">, run: (entry: Omit<ActivityRow, "id" | "at" | "outcome" | "durationMs">) => Promise<T>): Promise<T> {
    const t0 = Date.now();
    let outcome: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: await run(entry) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    // History is written after the fact and never changes what the caller
    // is told: a full disk here must not turn a done action into an error.
    try {
      this.record({ ...entry, at: t0, outcome: outcome.ok ? "ok" : toErrorReport(outcome.error).code, durationMs: Date.now() - t0 });
    } catch (err) {
      this.onRecordFailure(err, entry.command);
    }
    if (outcome.ok) return outcome.value;
    throw outcome.error;
  }

  /** Told when an entry could not be written (logged by the coordinator). */
  onRecordFailure: (err: unknown, command: string) => void = () => {};

  /** One page, newest first; the key is the id (unique, and ascending with time of writing). */
  listPage(filter: { serial?: string; sinceMs?: number }, page: PageRequest): Page<ActivityRow> {
    const serial = filter.serial || undefined;
    const sinceMs = filter.sinceMs || undefined;
    return readPage(page, { list: "activity", filter: { serial, sinceMs } }, ["number"] as const, (row: ActivityRow) => [row.id] as const, (after, limit) => {
      const where: SQL[] = [];
      if (serial) where.push(eq(activity.serial, serial));
      if (sinceMs) where.push(gte(activity.at, sinceMs));
      if (after) where.push(lt(activity.id, after[0]));
      return this.db
        .select()
        .from(activity)
        .where(where.length > 0 ? and(...where) : undefined)
        .orderBy(desc(activity.id))
        .limit(limit)
        .all();
    });
  }
}
