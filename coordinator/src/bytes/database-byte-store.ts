import { join } from "node:path";
import { rm } from "node:fs/promises";
import { Errors, farmError } from "@farm/shared/errors";
import { readChunks } from "@farm/shared/verified-file";
import type { ByteRange, ByteStore, StoredFile } from "./byte-store.js";
import { checkKey } from "./key.js";
import { STORED_CHUNK_BYTES, type StoredFileStore } from "./stored-file-store.js";

/**
 * Files as 1 MiB chunks in the farm's database, so every replica serves
 * every file and losing a replica's disk loses none. Reads go a chunk at a
 * time: memory stays at one chunk per reader whatever the file's size.
 */
export class DatabaseByteStore implements ByteStore {
  readonly kind = "database";

  constructor(private readonly files: StoredFileStore) {}

  async adopt(key: string, file: string, meta: StoredFile): Promise<void> {
    checkKey(key);
    try {
      if (await this.files.head(key)) return;
      await this.files.insert(key, meta, readChunks(file, STORED_CHUNK_BYTES));
    } finally {
      await rm(file, { force: true });
    }
  }

  async adoptDir(prefix: string, dir: string, files: ReadonlyMap<string, StoredFile>): Promise<void> {
    checkKey(prefix);
    try {
      await this.files.remove(prefix, true);
      for (const [name, meta] of files) await this.files.insert(checkKey(`${prefix}/${name}`), meta, readChunks(join(dir, name), STORED_CHUNK_BYTES));
    } catch (err) {
      // Never half a directory: the caller indexes it only when this returns.
      await this.files.remove(prefix, true).catch(() => undefined);
      throw err;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  async sizeOf(key: string): Promise<number | undefined> {
    return (await this.files.head(checkKey(key)))?.size;
  }

  async *read(key: string, range?: ByteRange): AsyncGenerator<Uint8Array> {
    const head = await this.files.head(checkKey(key));
    if (!head) throw farmError(Errors.NOT_FOUND, `no stored file ${key}`, "key");
    const start = Math.max(0, range?.start ?? 0);
    const end = Math.min(head.size, range?.end ?? head.size);
    for (let seq = Math.floor(start / STORED_CHUNK_BYTES); seq * STORED_CHUNK_BYTES < end; seq++) {
      const base = seq * STORED_CHUNK_BYTES;
      const from = Math.max(0, start - base);
      const length = Math.min(STORED_CHUNK_BYTES, end - base) - from;
      // Only the part of the chunk the range needs leaves the database.
      const whole = from === 0 && length === STORED_CHUNK_BYTES;
      const chunk = await this.files.chunk(key, seq, whole ? undefined : { from, length });
      if (!chunk || chunk.length !== length) throw farmError(Errors.INTERNAL, `stored file ${key} is missing bytes of chunk ${seq}`, "key");
      yield chunk;
    }
  }

  async remove(key: string): Promise<void> {
    await this.files.remove(checkKey(key), false);
  }

  async removeUnder(prefix: string): Promise<void> {
    await this.files.remove(checkKey(prefix), true);
  }
}
