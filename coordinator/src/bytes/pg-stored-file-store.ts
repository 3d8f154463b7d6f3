import { and, eq, or, sql } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { storedChunks, storedFiles } from "../db/pg-schema.js";
import type { StoredFile } from "./byte-store.js";
import type { StoredFileStore } from "./stored-file-store.js";

/** Stored files in the replicas' PostgreSQL database. */
export class PgStoredFileStore implements StoredFileStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  async head(key: string): Promise<StoredFile | undefined> {
    const [row] = await this.db.select({ size: storedFiles.size, sha256: storedFiles.sha256 }).from(storedFiles).where(eq(storedFiles.key, key));
    return row;
  }

  async chunk(key: string, seq: number, part?: { from: number; length: number }): Promise<Uint8Array | undefined> {
    const data = part ? sql<Buffer>`substring(${storedChunks.data} FROM ${part.from + 1}::int FOR ${part.length}::int)`.mapWith(storedChunks.data) : storedChunks.data;
    const [row] = await this.db.select({ data }).from(storedChunks).where(and(eq(storedChunks.key, key), eq(storedChunks.seq, seq)));
    return row?.data;
  }

  async insert(key: string, meta: StoredFile, chunks: AsyncIterable<Uint8Array>): Promise<void> {
    await this.db.transaction(async (tx) => {
      // Two replicas taking in the same content-addressed file: the second waits here, then finds it stored.
      const [claimed] = await tx.insert(storedFiles).values({ key, size: meta.size, sha256: meta.sha256, createdAt: Date.now() }).onConflictDoNothing().returning({ key: storedFiles.key });
      if (!claimed) return;
      // The row is inserted first to claim the key; nobody sees it before the commit, and the commit brings every chunk.
      let seq = 0;
      for await (const c of chunks) await tx.insert(storedChunks).values({ key, seq: seq++, data: Buffer.from(c.buffer, c.byteOffset, c.byteLength) });
    });
  }

  async remove(key: string, under: boolean): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.delete(storedChunks).where(under ? or(eq(storedChunks.key, key), sql`substr(${storedChunks.key}, 1, ${key.length + 1}) = ${`${key}/`}`) : eq(storedChunks.key, key));
      await tx.delete(storedFiles).where(under ? or(eq(storedFiles.key, key), sql`substr(${storedFiles.key}, 1, ${key.length + 1}) = ${`${key}/`}`) : eq(storedFiles.key, key));
    });
  }
}
