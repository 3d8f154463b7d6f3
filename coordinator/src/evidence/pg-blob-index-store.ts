import { eq, lt, sum } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { blobs } from "../db/pg-schema.js";
import type { BlobIndexStore, BlobRow } from "./blob-index-store.js";

/** Blobs listed in the replicas' PostgreSQL database. */
export class PgBlobIndexStore implements BlobIndexStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  async insert(row: BlobRow): Promise<void> {
    await this.db.insert(blobs).values(row);
  }

  async get(id: string): Promise<BlobRow | undefined> {
    const [row] = await this.db.select().from(blobs).where(eq(blobs.id, id));
    return row;
  }

  async usage(owner: string): Promise<number> {
    const [row] = await this.db.select({ n: sum(blobs.size) }).from(blobs).where(eq(blobs.owner, owner));
    return Number(row?.n ?? 0);
  }

  async take(id: string): Promise<BlobRow | undefined> {
    // One statement: of two replicas taking the same blob, one gets the row.
    const [row] = await this.db.delete(blobs).where(eq(blobs.id, id)).returning();
    return row;
  }

  async olderThan(before: number): Promise<string[]> {
    return (await this.db.select({ id: blobs.id }).from(blobs).where(lt(blobs.createdAt, before))).map((r) => r.id);
  }

  async clear(): Promise<void> {
    await this.db.delete(blobs);
  }
}
