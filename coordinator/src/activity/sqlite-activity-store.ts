import { and, count, desc, eq, gte, lt, type SQL } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { activity } from "../db/schema.js";
import type { ActivityEntry, ActivityFilter, ActivityRow, ActivityStore, OutcomeCount } from "./activity-store.js";

/** The activity log in the coordinator's SQLite file. */
export class SqliteActivityStore implements ActivityStore {
  constructor(private readonly db: CoordinatorDb) {}

  async insert(entry: ActivityEntry): Promise<ActivityRow> {
    return this.db.insert(activity).values(entry).returning().get();
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
