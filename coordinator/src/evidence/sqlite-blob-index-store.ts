import { eq, lt, sum } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { blobs } from "../db/schema.js";
import type { BlobIndexStore, BlobRow } from "./blob-index-store.js";

/** Blobs listed in SQLite. */
export class SqliteBlobIndexStore implements BlobIndexStore {
  constructor(private readonly db: CoordinatorDb) {}

  async insert(row: BlobRow): Promise<void> {
    this.db.insert(blobs).values(row).run();
  }

  async get(id: string): Promise<BlobRow | undefined> {
    return this.db.select().from(blobs).where(eq(blobs.id, id)).get();
  }

  async usage(owner: string): Promise<number> {
    return Number(this.db.select({ n: sum(blobs.size) }).from(blobs).where(eq(blobs.owner, owner)).get()?.n ?? 0);
  }

  async take(id: string): Promise<BlobRow | undefined> {
    return this.db.delete(blobs).where(eq(blobs.id, id)).returning().get();
  }

  async olderThan(before: number): Promise<string[]> {
    return this.db.select({ id: blobs.id }).from(blobs).where(lt(blobs.createdAt, before)).all().map((r) => r.id);
  }

  async clear(): Promise<void> {
    this.db.delete(blobs).run();
  }
}
