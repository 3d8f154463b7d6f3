import { and, count, desc, eq, inArray, lt, or, sql, type SQL } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { evidence } from "../db/pg-schema.js";
import type { EvidenceFilter, EvidenceIndexStore, EvidenceRow, EvidenceTotal } from "./evidence-index-store.js";

// Bytewise, as SQLite compares: the order of bundles sharing a millisecond
// must not depend on the database's locale.
const idBytes = sql`${evidence.evidenceId} collate "C"`;

/** The evidence index in PostgreSQL. */
export class PgEvidenceIndexStore implements EvidenceIndexStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  async get(evidenceId: string): Promise<EvidenceRow | undefined> {
    const [row] = await this.db.select().from(evidence).where(eq(evidence.evidenceId, evidenceId));
    return row;
  }

  async indexedAmong(evidenceIds: readonly string[]): Promise<Set<string>> {
    if (evidenceIds.length === 0) return new Set();
    const rows = await this.db.select({ id: evidence.evidenceId }).from(evidence).where(inArray(evidence.evidenceId, [...evidenceIds]));
    return new Set(rows.map((r) => r.id));
  }

  async insert(row: EvidenceRow): Promise<void> {
    await this.db.insert(evidence).values(row);
  }

  async totals(): Promise<EvidenceTotal[]> {
    return this.db
      .select({ kind: evidence.kind, status: evidence.status, bundles: count(), bytes: sql<number>`coalesce(sum(${evidence.totalBytes}), 0)`.mapWith(Number) })
      .from(evidence)
      .groupBy(evidence.kind, evidence.status);
  }

  async listAfter(filter: EvidenceFilter, after: readonly [number, string] | undefined, limit: number): Promise<EvidenceRow[]> {
    const where: SQL[] = [];
    if (filter.serial) where.push(eq(evidence.serial, filter.serial));
    if (filter.status) where.push(eq(evidence.status, filter.status));
    if (filter.label) where.push(eq(evidence.label, filter.label));
    if (after) where.push(or(lt(evidence.createdAt, after[0]), and(eq(evidence.createdAt, after[0]), sql`${idBytes} < ${after[1]}`)) as SQL);
    return this.db
      .select()
      .from(evidence)
      .where(where.length > 0 ? and(...where) : undefined)
      .orderBy(desc(evidence.createdAt), sql`${idBytes} desc`)
      .limit(limit);
  }
}
