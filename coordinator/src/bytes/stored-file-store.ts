import type { StoredFile } from "./byte-store.js";

/** Chunks are at most this size; a file's chunk n holds bytes [n·CHUNK, (n+1)·CHUNK). */
export const STORED_CHUNK_BYTES = 1024 * 1024;

/** The database tables behind DatabaseByteStore (stored_files, stored_chunks). */
export interface StoredFileStore {
  head(key: string): Promise<StoredFile | undefined>;
  /** One chunk of a stored file (or `length` bytes of it from offset `from`), or undefined past its end. */
  chunk(key: string, seq: number, part?: { from: number; length: number }): Promise<Uint8Array | undefined>;
  /**
   * Stores a file's chunks and then its row, in one transaction: the row
   * is seen only with every chunk. A key already stored is left as it is.
   */
  insert(key: string, meta: StoredFile, chunks: AsyncIterable<Uint8Array>): Promise<void>;
  /** Removes files (rows and chunks): one key, or every key under a prefix. */
  remove(key: string, under: boolean): Promise<void>;
}
