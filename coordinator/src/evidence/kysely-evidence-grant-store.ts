import type { StoreDb } from "../db/store-db.js";
import type { EvidenceGrant, EvidenceGrantStore } from "./evidence-grant-store.js";

/** Issued evidence ids, one implementation for SQLite and PostgreSQL (the SQL is the same on both). */
export class KyselyEvidenceGrantStore implements EvidenceGrantStore {
  constructor(private readonly db: StoreDb) {}

  async insert(grant: EvidenceGrant): Promise<void> {
    await this.db.insertInto("evidenceGrants").values(grant).execute();
  }

  async get(evidenceId: string): Promise<EvidenceGrant | undefined> {
    const row = await this.db.selectFrom("evidenceGrants").selectAll().where("evidenceId", "=", evidenceId).executeTakeFirst();
    // The kind column is text: the values written are the type's.
    return row as EvidenceGrant | undefined;
  }

  async storedBytes(user: string): Promise<number> {
    // PostgreSQL's sum of bigint is numeric, read as text: a number either way.
    const row = await this.db
      .selectFrom("evidence")
      .innerJoin("evidenceGrants", "evidenceGrants.evidenceId", "evidence.evidenceId")
      .select((eb) => eb.fn.coalesce(eb.fn.sum<number | string>("evidence.totalBytes"), eb.lit(0)).as("bytes"))
      .where("evidenceGrants.requestedBy", "=", user)
      .executeTakeFirst();
    return Number(row?.bytes ?? 0);
  }
}
