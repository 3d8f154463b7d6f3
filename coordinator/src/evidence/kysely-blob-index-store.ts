import type { StoreDb } from "../db/store-db.js";
import type { BlobIndexStore, BlobRow } from "./blob-index-store.js";

/** Blobs listed in the farm's database, one implementation for SQLite and PostgreSQL (the SQL is the same on both). */
export class KyselyBlobIndexStore implements BlobIndexStore {
  constructor(private readonly db: StoreDb) {}

  async insert(row: BlobRow): Promise<void> {
    await this.db.insertInto("blobs").values(row).execute();
  }

  get(id: string): Promise<BlobRow | undefined> {
    return this.db.selectFrom("blobs").selectAll().where("id", "=", id).executeTakeFirst();
  }

  async usage(owner: string): Promise<number> {
    // PostgreSQL's sum of bigint is numeric, read as text: a number either way.
    const row = await this.db
      .selectFrom("blobs")
      .select((eb) => eb.fn.sum<number | string | null>("size").as("n"))
      .where("owner", "=", owner)
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  take(id: string): Promise<BlobRow | undefined> {
    // One statement: of two replicas taking the same blob, one gets the row.
    return this.db.deleteFrom("blobs").where("id", "=", id).returningAll().executeTakeFirst();
  }

  async olderThan(before: number): Promise<string[]> {
    return (await this.db.selectFrom("blobs").select("id").where("createdAt", "<", before).execute()).map((r) => r.id);
  }

  async clear(): Promise<void> {
    await this.db.deleteFrom("blobs").execute();
  }
}
