import { eq, sql } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { evidence, evidenceGrants } from "../db/pg-schema.js";
import type { EvidenceGrant, EvidenceGrantStore } from "./evidence-grant-store.js";

/** Issued evidence ids in PostgreSQL. */
export class PgEvidenceGrantStore implements EvidenceGrantStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  async insert(grant: EvidenceGrant): Promise<void> {
    await this.db.insert(evidenceGrants).values(grant);
  }

  async get(evidenceId: string): Promise<EvidenceGrant | undefined> {
    const [row] = await this.db.select().from(evidenceGrants).where(eq(evidenceGrants.evidenceId, evidenceId));
    return row;
  }

  async storedBytes(user: string): Promise<number> {
    // sum(bigint) is numeric, which pg hands over as text: read it as a number.
    const [row] = await this.db
      .select({ bytes: sql<number>`coalesce(sum(${evidence.totalBytes}), 0)`.mapWith(Number) })
      .from(evidence)
      .innerJoin(evidenceGrants, eq(evidenceGrants.evidenceId, evidence.evidenceId))
      .where(eq(evidenceGrants.requestedBy, user));
    return row?.bytes ?? 0;
  }
}
