import { and, count, desc, eq, gte, lt, sql, type Placeholder, type SQL } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { activity } from "../db/schema.js";
import type { ActivityEntry, ActivityFilter, ActivityRow, ActivityStore, OutcomeCount } from "./activity-store.js";

/** The activity log in the coordinator's SQLite file. */
export class SqliteActivityStore implements ActivityStore {
  // Prepared once: every routed call writes one entry.
  private readonly insertOne;

  constructor(private readonly db: CoordinatorDb) {
    const columns = ["at", "caller", "leaseId", "serial", "physicalId", "agentId", "command", "outcome", "durationMs", "requestId", "detail"] as const satisfies readonly (keyof ActivityEntry)[];
    const values = Object.fromEntries(columns.map((c) => [c, sql.placeholder(c)])) as Record<(typeof columns)[number], Placeholder>;
    this.insertOne = db.insert(activity).values(values).returning().prepare();
  }

  async insert(entry: ActivityEntry): Promise<ActivityRow> {
    return this.insertOne.get(entry) as ActivityRow;
  }

  async get(id: number): Promise<ActivityRow | undefined> {
    return this.db.select().from(activity).where(eq(activity.id, id)).get();
  }

  async countByOutcome(): Promise<OutcomeCount[]> {
    return this.db
      .select({ command: activity.command, outcome: activity.outcome, n: count() })
      .from(activity)
      .groupBy(activity.command, activity.outcome)
      .all();
  }

  async listBefore(filter: ActivityFilter, beforeId: number | undefined, limit: number): Promise<ActivityRow[]> {
    return this.db
      .select()
      .from(activity)
      .where(whereOf(filter, beforeId))
      .orderBy(desc(activity.id))
      .limit(limit)
      .all();
  }
}

function whereOf(filter: ActivityFilter, beforeId: number | undefined): SQL | undefined {
  const where: SQL[] = [];
  if (filter.serial) where.push(eq(activity.serial, filter.serial));
  if (filter.sinceMs) where.push(gte(activity.at, filter.sinceMs));
  if (beforeId !== undefined) where.push(lt(activity.id, beforeId));
  return where.length > 0 ? and(...where) : undefined;
}
