import { createHash, type Hash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";

/** Files move in chunks of at most 1 MiB (bounded memory on every hop). */
export const CHUNK_BYTES = 1024 * 1024;

export async function sha256File(path: string): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: CHUNK_BYTES })) h.update(chunk as Buffer);
  return h.digest("hex");
}

/** A file's bytes in chunks of at most `chunkBytes`. */
export async function* readChunks(path: string, chunkBytes = CHUNK_BYTES): AsyncGenerator<Uint8Array> {
  for await (const chunk of createReadStream(path, { highWaterMark: chunkBytes })) yield new Uint8Array(chunk as Buffer);
}

/** A write that made no progress although bytes were left to write. */
export class ShortWriteError extends Error {
  readonly code = "ESHORTWRITE";
  constructor(
    readonly path: string,
    readonly written: number,
    readonly wanted: number,
  ) {
    super(`short write to ${path}: ${written} of ${wanted} bytes written and the file system accepts no more`);
    this.name = "ShortWriteError";
  }
}

/**
 * Writes every byte at the file's current position, checking `bytesWritten`
 * of each write: a short write is continued (the next write reports why the
 * disk refused, usually ENOSPC), and a write that makes no progress throws
 * ShortWriteError rather than looping.
 */
export async function writeAll(fh: FileHandle, bytes: Uint8Array, path = "file"): Promise<void> {
  let off = 0;
  while (off < bytes.length) {
    const { bytesWritten } = await fh.write(bytes, off, bytes.length - off);
    if (bytesWritten <= 0) throw new ShortWriteError(path, off, bytes.length);
    off += bytesWritten;
  }
}

export interface Expected {
  size: number;
  sha256: string;
}

/**
 * Receives one file whose size and sha256 were announced before its bytes:
 * created new (never overwriting) with mode 0600, refused past the announced
 * size, fsync'd, and compared with the announcement at the end. Callers turn
 * a mismatch into their own error.
 */
export class VerifiedFileWriter {
  private readonly hash: Hash = createHash("sha256");
  private got = 0;

  private constructor(
    readonly path: string,
    readonly expected: Expected,
    private readonly fh: FileHandle,
  ) {}

  static async create(path: string, expected: Expected): Promise<VerifiedFileWriter> {
    return new VerifiedFileWriter(path, expected, await open(path, "wx", 0o600));
  }

  get received(): number {
    return this.got;
  }

  /**
   * Appends bytes; false (nothing written) if they go past the announced
   * size. Every byte reaches the file or this throws (a full disk gives its
   * ENOSPC): a short write is never counted as a whole one.
   */
  async write(bytes: Uint8Array): Promise<boolean> {
    if (this.got + bytes.length > this.expected.size) return false;
    await writeAll(this.fh, bytes, this.path);
    this.got += bytes.length;
    this.hash.update(bytes);
    return true;
  }

  /**
   * Syncs and closes; ok when size and sha256 match the announcement and the
   * file on disk holds exactly the bytes received.
   */
  async finish(): Promise<{ ok: boolean; size: number; sha256: string }> {
    let onDisk: number;
    try {
      await this.fh.sync();
      onDisk = (await this.fh.stat()).size;
    } finally {
      await this.fh.close();
    }
    const sha256 = this.hash.digest("hex");
    return { ok: this.got === this.expected.size && onDisk === this.got && sha256 === this.expected.sha256, size: this.got, sha256 };
  }

  /** Closes without checking (the transfer failed); the caller removes the file. */
  async abort(): Promise<void> {
    await this.fh.close().catch(() => undefined);
  }
}
