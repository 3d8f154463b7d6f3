import { and, eq, or, sql } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { storedChunks, storedFiles } from "../db/schema.js";
import type { StoredFile } from "./byte-store.js";
import type { StoredFileStore } from "./stored-file-store.js";

/** Stored files in a SQLite database (`--byte-store database` on one coordinator). */
export class SqliteStoredFileStore implements StoredFileStore {
  constructor(private readonly db: CoordinatorDb) {}

  async head(key: string): Promise<StoredFile | undefined> {
    return this.db.select({ size: storedFiles.size, sha256: storedFiles.sha256 }).from(storedFiles).where(eq(storedFiles.key, key)).get();
  }

  async chunk(key: string, seq: number, part?: { from: number; length: number }): Promise<Uint8Array | undefined> {
    const data = part ? sql<Buffer>`substr(${storedChunks.data}, ${part.from + 1}, ${part.length})` : storedChunks.data;
    return this.db.select({ data }).from(storedChunks).where(and(eq(storedChunks.key, key), eq(storedChunks.seq, seq))).get()?.data;
  }

  async insert(key: string, meta: StoredFile, chunks: AsyncIterable<Uint8Array>): Promise<void> {
    if (await this.head(key)) return;
    // Chunk by chunk (memory stays at one chunk), then the row: the file is listed only whole.
    try {
      this.db.delete(storedChunks).where(eq(storedChunks.key, key)).run();
      let seq = 0;
      for await (const c of chunks) this.db.insert(storedChunks).values({ key, seq: seq++, data: Buffer.from(c.buffer, c.byteOffset, c.byteLength) }).run();
      this.db.insert(storedFiles).values({ key, size: meta.size, sha256: meta.sha256, createdAt: Date.now() }).onConflictDoNothing().run();
    } catch (err) {
      this.db.delete(storedChunks).where(eq(storedChunks.key, key)).run();
      throw err;
    }
  }

  async remove(key: string, under: boolean): Promise<void> {
    this.db.transaction((tx) => {
      tx.delete(storedChunks).where(under ? or(eq(storedChunks.key, key), sql`substr(${storedChunks.key}, 1, ${key.length + 1}) = ${`${key}/`}`) : eq(storedChunks.key, key)).run();
      tx.delete(storedFiles).where(under ? or(eq(storedFiles.key, key), sql`substr(${storedFiles.key}, 1, ${key.length + 1}) = ${`${key}/`}`) : eq(storedFiles.key, key)).run();
    });
  }
}
