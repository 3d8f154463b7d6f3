import { randomUUID } from "node:crypto";
import { readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { renameDurably } from "@farm/shared/durable-file";
import { Errors, farmError } from "@farm/shared/errors";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import { BlobPartSchema, type BlobPart } from "@farm/shared/gen/farm/v1/blob_pb";
import { readChunks, VerifiedFileWriter } from "@farm/shared/verified-file";

export const BLOB_MAX_BYTES = 2 * 1024 * 1024 * 1024;
/** Bytes of blobs one caller may hold at once (stored and arriving), unless configured otherwise. */
export const BLOB_QUOTA_DEFAULT = 2 * 1024 * 1024 * 1024;
export const BLOB_TTL_MS = 10 * 60_000;
const idPattern = /^[0-9a-f-]{36}$/;

/**
 * Short-lived files between callers and agents. A blob is stored under a
 * temporary name while it arrives (every write checked), checked against its
 * announced size and sha256, fsync'd, then renamed to its id and the
 * directory fsync'd; anything older than the TTL is removed. A disk that
 * cannot hold it fails the upload with a transfer error, not INTERNAL.
 * Each owner (token) holds at most `quotaBytes`, counted from what uploads
 * announce, so an upload over quota is refused before any of its bytes.
 */
export class BlobStore {
  readonly dir: string;
  private readonly meta = new Map<string, { size: number; sha256: string; name: string; at: number; owner: string }>();
  /** Bytes announced by uploads still arriving, by owner. */
  private readonly arriving = new Map<string, number>();

  constructor(
    dataDir: string,
    readonly quotaBytes = BLOB_QUOTA_DEFAULT,
  ) {
    this.dir = join(dataDir, "blobs");
  }

  /** Bytes an owner holds: stored blobs and uploads under way. */
  usage(owner: string): number {
    let n = this.arriving.get(owner) ?? 0;
    for (const m of this.meta.values()) if (m.owner === owner) n += m.size;
    return n;
  }

  async init(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
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
    const used = this.usage(owner);
    if (used + size > this.quotaBytes) {
      throw farmError(Errors.QUOTA_EXCEEDED, `this blob (${size} bytes) would exceed your blob quota: ${used} of ${this.quotaBytes} bytes in use; blobs are freed once fetched or after ${BLOB_TTL_MS / 60_000} minutes`, "size");
    }
    this.arriving.set(owner, (this.arriving.get(owner) ?? 0) + size);
    try {
      const id = await this.receive(it, header, size);
      this.meta.set(id, { size, sha256: header.sha256, name: header.name, at: Date.now(), owner });
      return id;
    } finally {
      const left = (this.arriving.get(owner) ?? size) - size;
      if (left > 0) this.arriving.set(owner, left);
      else this.arriving.delete(owner);
    }
  }

  /** Stores the chunks after a checked header under a new id. */
  private async receive(it: AsyncIterator<BlobPart | undefined>, header: { sha256: string }, size: number): Promise<string> {
    const id = randomUUID();
    const tmp = join(this.dir, `${id}.part`);
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
    try {
      // Published only whole, and the name survives a crash.
      await renameDurably(tmp, join(this.dir, id));
    } catch (err) {
      await rm(tmp, { force: true });
      await rm(join(this.dir, id), { force: true });
      throw storageError(err);
    }
    return id;
  }

  async *get(id: string): AsyncGenerator<BlobPart> {
    const m = idPattern.test(id) ? this.meta.get(id) : undefined;
    if (!m) throw farmError(Errors.NOT_FOUND, `no blob ${id} (blobs last ${BLOB_TTL_MS / 60_000} minutes)`, "blob_id");
    yield create(BlobPartSchema, { kind: { case: "header", value: { size: BigInt(m.size), sha256: m.sha256, name: m.name } } });
    for await (const chunk of readChunks(join(this.dir, id))) yield create(BlobPartSchema, { kind: { case: "chunk", value: chunk } });
  }

  /** What an `owner`'s blob was checked to be, without taking it: NOT_FOUND for anyone else's. */
  peek(id: string, owner: string): { size: number; sha256: string } {
    const m = idPattern.test(id) ? this.meta.get(id) : undefined;
    if (!m || m.owner !== owner) throw farmError(Errors.NOT_FOUND, `no blob ${id} of ${owner}`, "blob_id");
    return { size: m.size, sha256: m.sha256 };
  }

  /**
   * Hands a blob's file to the caller, who moves or removes it: the blob
   * must be `owner`'s. Returns where it is and what it was checked to be.
   */
  take(id: string, owner: string): { file: string; size: number; sha256: string } {
    const m = this.peek(id, owner);
    this.meta.delete(id);
    return { file: join(this.dir, id), ...m };
  }

  async remove(id: string): Promise<void> {
    if (!idPattern.test(id)) return;
    this.meta.delete(id);
    await rm(join(this.dir, id), { force: true });
  }

  /** Drops expired blobs and stray partial uploads. */
  async sweep(now = Date.now()): Promise<void> {
    for (const [id, m] of this.meta) if (now - m.at > BLOB_TTL_MS) await this.remove(id);
    for (const name of await readdir(this.dir).catch(() => [] as string[])) {
      if (!name.endsWith(".part")) continue;
      const s = await stat(join(this.dir, name)).catch(() => undefined);
      if (s && now - s.mtimeMs > BLOB_TTL_MS) await rm(join(this.dir, name), { force: true });
    }
  }
}

/** A file-system failure while storing a blob, as the caller should see it. */
function storageError(err: unknown): unknown {
  if (err instanceof ConnectError || typeof (err as NodeJS.ErrnoException | null)?.code !== "string") return err;
  return farmError(Errors.EVIDENCE_TRANSFER_FAILED, `the coordinator could not store the blob: ${(err as Error).message}`, undefined, undefined, err);
}
