import { and, count, desc, eq, gte, lt, type SQL } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { activity } from "../db/pg-schema.js";
import type { ActivityEntry, ActivityFilter, ActivityRow, ActivityStore, OutcomeCount } from "./activity-store.js";

/** The activity log in the replicas' PostgreSQL database. */
export class PgActivityStore implements ActivityStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  async insert(entry: ActivityEntry): Promise<ActivityRow> {
    const [row] = await this.db.insert(activity).values(entry).returning();
    if (!row) throw new Error("the activity entry was not written");
    return row;
  }

  async get(id: number): Promise<ActivityRow | undefined> {
    const [row] = await this.db.select().from(activity).where(eq(activity.id, id));
    return row;
  }

  countByOutcome(): Promise<OutcomeCount[]> {
    return this.db
      .select({ command: activity.command, outcome: activity.outcome, n: count() })
      .from(activity)
      .groupBy(activity.command, activity.outcome);
  }

  listBefore(filter: ActivityFilter, beforeId: number | undefined, limit: number): Promise<ActivityRow[]> {
    return this.db
      .select()
      .from(activity)
      .where(whereOf(filter, beforeId))
      .orderBy(desc(activity.id))
      .limit(limit);
  }
}

function whereOf(filter: ActivityFilter, beforeId: number | undefined): SQL | undefined {
  const where: SQL[] = [];
  if (filter.serial) where.push(eq(activity.serial, filter.serial));
  if (filter.sinceMs) where.push(gte(activity.at, filter.sinceMs));
  if (beforeId !== undefined) where.push(lt(activity.id, beforeId));
  return where.length > 0 ? and(...where) : undefined;
}
