import { preparedStatement, type StoreDb } from "../db/store-db.js";
import type { ActivityEntry, ActivityFilter, ActivityRow, ActivityStore, OutcomeCount } from "./activity-store.js";

const COLUMNS = ["at", "caller", "leaseId", "serial", "physicalId", "agentId", "command", "outcome", "durationMs", "requestId", "detail"] as const satisfies readonly (keyof ActivityEntry)[];

/** The activity log, one implementation for SQLite and PostgreSQL (the SQL is the same on both). */
export class KyselyActivityStore implements ActivityStore {
  // Compiled once: every routed call writes one entry.
  private readonly insertOne: (entry: ActivityEntry) => Promise<ActivityRow[]>;

  constructor(private readonly db: StoreDb) {
    this.insertOne = preparedStatement<ActivityEntry, ActivityRow>(db, COLUMNS, (e) => db.insertInto("activity").values(e).returningAll());
  }

  async insert(entry: ActivityEntry): Promise<ActivityRow> {
    const [row] = await this.insertOne(entry);
    if (!row) throw new Error("the activity entry was not written");
    return row;
  }

  get(id: number): Promise<ActivityRow | undefined> {
    return this.db.selectFrom("activity").selectAll().where("id", "=", id).executeTakeFirst();
  }

  countByOutcome(): Promise<OutcomeCount[]> {
    return this.db
      .selectFrom("activity")
      .select((eb) => ["command", "outcome", eb.fn.countAll<number>().as("n")])
      .groupBy(["command", "outcome"])
      .execute();
  }

  listBefore(filter: ActivityFilter, beforeId: number | undefined, limit: number): Promise<ActivityRow[]> {
    let q = this.db.selectFrom("activity").selectAll();
    if (filter.serial) q = q.where("serial", "=", filter.serial);
    if (filter.sinceMs) q = q.where("at", ">=", filter.sinceMs);
    if (beforeId !== undefined) q = q.where("id", "<", beforeId);
    return q.orderBy("id", "desc").limit(limit).execute();
  }
}
