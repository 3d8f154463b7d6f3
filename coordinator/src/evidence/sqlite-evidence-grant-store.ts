import { eq, sql } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { evidence, evidenceGrants } from "../db/schema.js";
import type { EvidenceGrant, EvidenceGrantStore } from "./evidence-grant-store.js";

/** Issued evidence ids in the coordinator's SQLite database. */
export class SqliteEvidenceGrantStore implements EvidenceGrantStore {
  constructor(private readonly db: CoordinatorDb) {}

  async insert(grant: EvidenceGrant): Promise<void> {
    this.db.insert(evidenceGrants).values(grant).run();
  }

  async get(evidenceId: string): Promise<EvidenceGrant | undefined> {
    return this.db.select().from(evidenceGrants).where(eq(evidenceGrants.evidenceId, evidenceId)).get();
  }

  async storedBytes(user: string): Promise<number> {
    const row = this.db
      .select({ bytes: sql<number>`coalesce(sum(${evidence.totalBytes}), 0)`.mapWith(Number) })
      .from(evidence)
      .innerJoin(evidenceGrants, eq(evidenceGrants.evidenceId, evidence.evidenceId))
      .where(eq(evidenceGrants.requestedBy, user))
      .get();
    return row?.bytes ?? 0;
  }
}
