import { and, count, desc, eq, inArray, lt, or, sql, type SQL } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { evidence } from "../db/schema.js";
import type { EvidenceFilter, EvidenceIndexStore, EvidenceRow, EvidenceTotal } from "./evidence-index-store.js";

/** The evidence index in the coordinator's SQLite database. */
export class SqliteEvidenceIndexStore implements EvidenceIndexStore {
  constructor(private readonly db: CoordinatorDb) {}

  async get(evidenceId: string): Promise<EvidenceRow | undefined> {
    return this.db.select().from(evidence).where(eq(evidence.evidenceId, evidenceId)).get();
  }

  async indexedAmong(evidenceIds: readonly string[]): Promise<Set<string>> {
    if (evidenceIds.length === 0) return new Set();
    const rows = this.db.select({ id: evidence.evidenceId }).from(evidence).where(inArray(evidence.evidenceId, [...evidenceIds])).all();
    return new Set(rows.map((r) => r.id));
  }

  async insert(row: EvidenceRow): Promise<void> {
    this.db.insert(evidence).values(row).run();
  }

  async totals(): Promise<EvidenceTotal[]> {
    return this.db
      .select({ kind: evidence.kind, status: evidence.status, bundles: count(), bytes: sql<number>`coalesce(sum(${evidence.totalBytes}), 0)`.mapWith(Number) })
      .from(evidence)
      .groupBy(evidence.kind, evidence.status)
      .all();
  }

  async listAfter(filter: EvidenceFilter, after: readonly [number, string] | undefined, limit: number): Promise<EvidenceRow[]> {
    const where: SQL[] = [];
    if (filter.serial) where.push(eq(evidence.serial, filter.serial));
    if (filter.status) where.push(eq(evidence.status, filter.status));
    if (filter.label) where.push(eq(evidence.label, filter.label));
    if (after) where.push(or(lt(evidence.createdAt, after[0]), and(eq(evidence.createdAt, after[0]), lt(evidence.evidenceId, after[1]))) as SQL);
    return this.db
      .select()
      .from(evidence)
      .where(where.length > 0 ? and(...where) : undefined)
      .orderBy(desc(evidence.createdAt), desc(evidence.evidenceId))
      .limit(limit)
      .all();
  }
}
