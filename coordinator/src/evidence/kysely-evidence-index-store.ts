import { sql, type RawBuilder } from "kysely";
import type { DatabaseDialect } from "../db/database.js";
import type { StoreDb } from "../db/store-db.js";
import type { EvidenceFilter, EvidenceIndexStore, EvidenceRow, EvidenceTotal } from "./evidence-index-store.js";

/**
 * The evidence index, one implementation for SQLite and PostgreSQL. One
 * fragment differs by dialect: ids compare bytewise in a page's order, as
 * SQLite compares text; PostgreSQL is told so (COLLATE "C"), or bundles
 * sharing a millisecond would page in the database locale's order.
 */
export class KyselyEvidenceIndexStore implements EvidenceIndexStore {
  private readonly idBytes: RawBuilder<string>;

  constructor(private readonly db: StoreDb, dialect: DatabaseDialect) {
    this.idBytes = dialect === "postgres" ? sql<string>`${sql.ref("evidenceId")} collate "C"` : sql<string>`${sql.ref("evidenceId")}`;
  }

  get(evidenceId: string): Promise<EvidenceRow | undefined> {
    return this.db.selectFrom("evidence").selectAll().where("evidenceId", "=", evidenceId).executeTakeFirst();
  }

  async indexedAmong(evidenceIds: readonly string[]): Promise<Set<string>> {
    if (evidenceIds.length === 0) return new Set();
    const rows = await this.db.selectFrom("evidence").select("evidenceId").where("evidenceId", "in", [...evidenceIds]).execute();
    return new Set(rows.map((r) => r.evidenceId));
  }

  async insert(row: EvidenceRow): Promise<void> {
    await this.db.insertInto("evidence").values(row).execute();
  }

  async totals(): Promise<EvidenceTotal[]> {
    const rows = await this.db
      .selectFrom("evidence")
      .select((eb) => ["kind", "status", eb.fn.countAll<number>().as("bundles"), eb.fn.coalesce(eb.fn.sum<number | string>("totalBytes"), eb.lit(0)).as("bytes")])
      .groupBy(["kind", "status"])
      .execute();
    // PostgreSQL's sum of bigint is numeric, read as text.
    return rows.map((r) => ({ ...r, bytes: Number(r.bytes) }));
  }

  listAfter(filter: EvidenceFilter, after: readonly [number, string] | undefined, limit: number): Promise<EvidenceRow[]> {
    let q = this.db.selectFrom("evidence").selectAll();
    if (filter.serial) q = q.where("serial", "=", filter.serial);
    if (filter.status) q = q.where("status", "=", filter.status);
    if (filter.label) q = q.where("label", "=", filter.label);
    if (after) {
      const [at, id] = after;
      q = q.where((eb) => eb.or([eb("createdAt", "<", at), eb.and([eb("createdAt", "=", at), eb(this.idBytes, "<", id)])]));
    }
    return q.orderBy("createdAt", "desc").orderBy(this.idBytes, "desc").limit(limit).execute();
  }
}
