import { and, desc, eq, gte, type SQL } from "drizzle-orm";
import type { CoordinatorDb } from "./db/open-database.js";
import { activity } from "./db/schema.js";

export type ActivityRow = typeof activity.$inferSelect;

/** Every routed action: who, with which lease, on which device, what happened. */
export class ActivityLog {
  constructor(private readonly db: CoordinatorDb) {}

  record(entry: Omit<ActivityRow, "id">): void {
    this.db.insert(activity).values(entry).run();
  }

  list(filter: { serial?: string; sinceMs?: number; limit?: number }): ActivityRow[] {
    const where: SQL[] = [];
    if (filter.serial) where.push(eq(activity.serial, filter.serial));
    if (filter.sinceMs) where.push(gte(activity.at, filter.sinceMs));
    return this.db
      .select()
      .from(activity)
      .where(where.length > 0 ? and(...where) : undefined)
      .orderBy(desc(activity.id))
      .limit(Math.min(filter.limit || 200, 10_000))
      .all();
  }
}
