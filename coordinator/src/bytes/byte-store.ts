/** What a stored file was checked to be when it was taken in. */
export interface StoredFile {
  size: number;
  sha256: string;
}

/** Bytes [start, end) of a file. */
export interface ByteRange {
  start: number;
  end: number;
}

/** Where the coordinator keeps the bytes of evidence, session images and blobs. */
export type ByteStoreKind = "files" | "database";

/**
 * Immutable files by key (a relative path such as `evidence/<id>/manifest.json`).
 * Callers check bytes on arrival (size and sha256) in a local staging file
 * and then hand the file over: a stored file is always whole.
 */
export interface ByteStore {
  readonly kind: ByteStoreKind;
  /**
   * Takes a checked local file in under `key` and removes the local file.
   * A key already stored is kept as it is (keys of content-addressed files
   * name their content).
   */
  adopt(key: string, file: string, meta: StoredFile): Promise<void>;
  /**
   * Takes a checked local directory of files in under `prefix/`, each under
   * its name, and removes the directory. Whatever was under the prefix
   * before is replaced.
   */
  adoptDir(prefix: string, dir: string, files: ReadonlyMap<string, StoredFile>): Promise<void>;
  /** The stored size, or undefined when there is no such file. */
  sizeOf(key: string): Promise<number | undefined>;
  /** The bytes (or a range of them) in chunks; NOT_FOUND when there is no such file. */
  read(key: string, range?: ByteRange): AsyncGenerator<Uint8Array>;
  remove(key: string): Promise<void>;
  /** Removes every file under `prefix/`. */
  removeUnder(prefix: string): Promise<void>;
}
