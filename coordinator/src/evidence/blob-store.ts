import { randomUUID } from "node:crypto";
import { createWriteStream } from "node:fs";
import { readdir, rm, stat } from "node:fs/promises";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { join } from "node:path";
import { ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { Errors, farmError } from "@farm/shared/errors";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import { BlobPartSchema, type BlobPart } from "@farm/shared/gen/farm/v1/blob_pb";
import { VerifiedFileWriter } from "@farm/shared/verified-file";
import type { ByteStore } from "../bytes/byte-store.js";
import { FileByteStore } from "../bytes/file-byte-store.js";
import type { BlobIndexStore, BlobRow } from "./blob-index-store.js";

export const BLOB_MAX_BYTES = 2 * 1024 * 1024 * 1024;
/** Bytes of blobs one caller may hold at once (stored and arriving), unless configured otherwise. */
export const BLOB_QUOTA_DEFAULT = 2 * 1024 * 1024 * 1024;
export const BLOB_TTL_MS = 10 * 60_000;
const idPattern = /^[0-9a-f-]{36}$/;

/** Where a blob store lists blobs and keeps their bytes. */
export interface BlobStoreOptions {
  index: BlobIndexStore;
  /** Bytes under `blobs/<id>`: files in the data dir, or the database. */
  bytes: ByteStore;
  quotaBytes?: number;
  /**
   * Replicas share the index and the bytes: a replica starting must not
   * clear what the others hold. One coordinator starts afresh.
   */
  shared?: boolean;
}

/**
 * Short-lived files between callers and agents. A blob is received into a
 * local staging file (every write checked), checked against its announced
 * size and sha256, handed to the byte store whole and then listed; anything
 * older than the TTL is removed. A disk that cannot hold it fails the
 * upload with a transfer error, not INTERNAL. Each owner (token) holds at
 * most `quotaBytes`, counted from what uploads announce, so an upload over
 * quota is refused before any of its bytes. Listed in the database, a blob
 * uploaded through one replica is served by any.
 */
export class BlobStore {
  /** Staging for arriving blobs (and the blobs themselves, in the files byte store). */
  readonly dir: string;
  readonly quotaBytes: number;
  private readonly index: BlobIndexStore;
  private readonly bytes: ByteStore;
  private readonly shared: boolean;
  /** Bytes announced by uploads still arriving here, by owner. */
  private readonly arriving = new Map<string, number>();

  constructor(dataDir: string, opts: BlobStoreOptions) {
    this.dir = join(dataDir, "blobs");
    this.index = opts.index;
    this.bytes = opts.bytes;
    this.quotaBytes = opts.quotaBytes ?? BLOB_QUOTA_DEFAULT;
    this.shared = opts.shared ?? false;
  }

  /** Bytes an owner holds: stored blobs and uploads under way here. */
  async usage(owner: string): Promise<number> {
    return (this.arriving.get(owner) ?? 0) + (await this.index.usage(owner));
  }

  async init(): Promise<void> {
    if (!this.shared) {
      // Blobs outlive no restart of a lone coordinator: nobody can be waiting for one.
      await this.index.clear();
      await rm(this.dir, { recursive: true, force: true });
      if (this.bytes.kind === "database") await this.bytes.removeUnder("blobs");
    }
    await ensurePrivateDir(this.dir);
  }

  async put(parts: AsyncIterable<BlobPart | undefined>, owner: string): Promise<string> {
    const it = parts[Symbol.asyncIterator]();
    const first = await it.next();
    const header = first.done ? undefined : first.value?.kind.case === "header" ? first.value.kind.value : undefined;
    if (!header) throw farmError(Errors.INVALID_ARGUMENT, "a blob starts with its header", "header");
    const size = Number(header.size);
    if (size < 0 || size > BLOB_MAX_BYTES) throw farmError(Errors.INVALID_ARGUMENT, `blobs are at most ${BLOB_MAX_BYTES} bytes`, "size");
    if (!/^[0-9a-f]{64}$/.test(header.sha256)) throw farmError(Errors.INVALID_ARGUMENT, "sha256 must be 64 hex digits", "sha256");
    if (header.name.length > 255) throw farmError(Errors.INVALID_ARGUMENT, "a blob's name is at most 255 characters", "name");
    // Counted as arriving before the stored usage is read, so two uploads at once both see each other.
    this.arriving.set(owner, (this.arriving.get(owner) ?? 0) + size);
    try {
      const used = (await this.usage(owner)) - size;
      if (used + size > this.quotaBytes) {
        throw farmError(Errors.QUOTA_EXCEEDED, `this blob (${size} bytes) would exceed your blob quota: ${used} of ${this.quotaBytes} bytes in use; blobs are freed once fetched or after ${BLOB_TTL_MS / 60_000} minutes`, "size");
      }
      const id = randomUUID();
      const tmp = await this.receive(it, header, size);
      try {
        await this.bytes.adopt(keyOf(id), tmp, { size, sha256: header.sha256 });
        await this.index.insert({ id, size, sha256: header.sha256, name: header.name, createdAt: Date.now(), owner });
      } catch (err) {
        await rm(tmp, { force: true });
        await this.bytes.remove(keyOf(id)).catch(() => undefined);
        throw storageError(err);
      }
      return id;
    } finally {
      const left = (this.arriving.get(owner) ?? size) - size;
      if (left > 0) this.arriving.set(owner, left);
      else this.arriving.delete(owner);
    }
  }

  /** Receives the chunks after a checked header into a staging file, checked. */
  private async receive(it: AsyncIterator<BlobPart | undefined>, header: { sha256: string }, size: number): Promise<string> {
    const tmp = join(this.dir, `${randomUUID()}.part`);
    const file = await VerifiedFileWriter.create(tmp, { size, sha256: header.sha256 }).catch((err: unknown) => {
      throw storageError(err);
    });
    let got;
    try {
      for (;;) {
        const n = await it.next();
        if (n.done) break;
        if (n.value?.kind.case !== "chunk") continue;
        if (!(await file.write(n.value.kind.value))) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, "the blob is larger than announced", "chunk");
      }
      got = await file.finish();
    } catch (err) {
      await file.abort();
      await rm(tmp, { force: true });
      throw storageError(err);
    }
    if (!got.ok) {
      await rm(tmp, { force: true });
      throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, `blob arrived as ${got.size} bytes with sha256 ${got.sha256}; announced ${size} bytes with ${header.sha256}`, "chunk");
    }
    return tmp;
  }

  private async row(id: string): Promise<BlobRow | undefined> {
    return idPattern.test(id) ? this.index.get(id) : undefined;
  }

  async *get(id: string): AsyncGenerator<BlobPart> {
    const m = await this.row(id);
    if (!m) throw farmError(Errors.NOT_FOUND, `no blob ${id} (blobs last ${BLOB_TTL_MS / 60_000} minutes)`, "blob_id");
    yield create(BlobPartSchema, { kind: { case: "header", value: { size: BigInt(m.size), sha256: m.sha256, name: m.name } } });
    for await (const chunk of this.bytes.read(keyOf(id))) yield create(BlobPartSchema, { kind: { case: "chunk", value: chunk } });
  }

  /** What an `owner`'s blob was checked to be, without taking it: NOT_FOUND for anyone else's. */
  async peek(id: string, owner: string): Promise<{ size: number; sha256: string }> {
    const m = await this.row(id);
    if (!m || m.owner !== owner) throw farmError(Errors.NOT_FOUND, `no blob ${id} of ${owner}`, "blob_id");
    return { size: m.size, sha256: m.sha256 };
  }

  /**
   * Hands a blob's bytes to the caller as a local file, which the caller
   * moves or removes: the blob must be `owner`'s, and only one caller gets
   * it. Returns where it is and what it was checked to be.
   */
  async take(id: string, owner: string): Promise<{ file: string; size: number; sha256: string }> {
    await this.peek(id, owner);
    const m = await this.index.take(id);
    if (!m) throw farmError(Errors.NOT_FOUND, `no blob ${id} of ${owner}`, "blob_id");
    if (this.bytes instanceof FileByteStore) return { file: this.bytes.path(keyOf(id)), size: m.size, sha256: m.sha256 };
    const file = join(this.dir, `${randomUUID()}.part`);
    try {
      await pipeline(Readable.from(this.bytes.read(keyOf(id))), createWriteStream(file, { mode: 0o600 }));
    } catch (err) {
      await rm(file, { force: true });
      throw storageError(err);
    } finally {
      await this.bytes.remove(keyOf(id));
    }
    return { file, size: m.size, sha256: m.sha256 };
  }

  async remove(id: string): Promise<void> {
    if (!idPattern.test(id)) return;
    await this.index.take(id);
    await this.bytes.remove(keyOf(id));
  }

  /** Drops expired blobs and stray staging files. */
  async sweep(now = Date.now()): Promise<void> {
    for (const id of await this.index.olderThan(now - BLOB_TTL_MS)) await this.remove(id);
    for (const name of await readdir(this.dir).catch(() => [] as string[])) {
      if (!name.endsWith(".part")) continue;
      const s = await stat(join(this.dir, name)).catch(() => undefined);
      if (s && now - s.mtimeMs > BLOB_TTL_MS) await rm(join(this.dir, name), { force: true });
    }
  }
}

function keyOf(id: string): string {
  return `blobs/${id}`;
}

/** A file-system failure while storing a blob, as the caller should see it. */
function storageError(err: unknown): unknown {
  if (err instanceof ConnectError || typeof (err as NodeJS.ErrnoException | null)?.code !== "string") return err;
  return farmError(Errors.EVIDENCE_TRANSFER_FAILED, `the coordinator could not store the blob: ${(err as Error).message}`, undefined, undefined, err);
}
