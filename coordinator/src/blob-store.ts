import { randomUUID } from "node:crypto";
import { readdir, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { ErrorCodes, farmError } from "@farm/shared/errors";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import { BlobPartSchema, type BlobPart } from "@farm/shared/gen/farm/v1/blob_pb";
import { readChunks, VerifiedFileWriter } from "@farm/shared/verified-file";

export const BLOB_MAX_BYTES = 2 * 1024 * 1024 * 1024;
export const BLOB_TTL_MS = 10 * 60_000;
const idPattern = /^[0-9a-f-]{36}$/;

/**
 * Short-lived files between callers and agents. A blob is stored under a
 * temporary name while it arrives, checked against its announced size and
 * sha256, then renamed to its id; anything older than the TTL is removed.
 */
export class BlobStore {
  readonly dir: string;
  private readonly meta = new Map<string, { size: number; sha256: string; name: string; at: number }>();

  constructor(dataDir: string) {
    this.dir = join(dataDir, "blobs");
  }

  async init(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
    await ensurePrivateDir(this.dir);
  }

  async put(parts: AsyncIterable<BlobPart | undefined>): Promise<string> {
    const it = parts[Symbol.asyncIterator]();
    const first = await it.next();
    const header = first.done ? undefined : first.value?.kind.case === "header" ? first.value.kind.value : undefined;
    if (!header) throw farmError(Code.InvalidArgument, ErrorCodes.invalidArgument, "a blob starts with its header", "header");
    const size = Number(header.size);
    if (size < 0 || size > BLOB_MAX_BYTES) throw farmError(Code.InvalidArgument, ErrorCodes.invalidArgument, `blobs are at most ${BLOB_MAX_BYTES} bytes`, "size");
    if (!/^[0-9a-f]{64}$/.test(header.sha256)) throw farmError(Code.InvalidArgument, ErrorCodes.invalidArgument, "sha256 must be 64 hex digits", "sha256");
    const id = randomUUID();
    const tmp = join(this.dir, `${id}.part`);
    const file = await VerifiedFileWriter.create(tmp, { size, sha256: header.sha256 });
    let got;
    try {
      for (;;) {
        const n = await it.next();
        if (n.done) break;
        if (n.value?.kind.case !== "chunk") continue;
        if (!(await file.write(n.value.kind.value))) throw farmError(Code.InvalidArgument, ErrorCodes.evidenceTransferFailed, "the blob is larger than announced", "chunk");
      }
      got = await file.finish();
    } catch (err) {
      await file.abort();
      await rm(tmp, { force: true });
      throw err;
    }
    if (!got.ok) {
      await rm(tmp, { force: true });
      throw farmError(Code.DataLoss, ErrorCodes.evidenceTransferFailed, `blob arrived as ${got.size} bytes with sha256 ${got.sha256}; announced ${size} bytes with ${header.sha256}`, "chunk");
    }
    await rename(tmp, join(this.dir, id));
    this.meta.set(id, { size, sha256: got.sha256, name: header.name, at: Date.now() });
    return id;
  }

  async *get(id: string): AsyncGenerator<BlobPart> {
    const m = idPattern.test(id) ? this.meta.get(id) : undefined;
    if (!m) throw farmError(Code.NotFound, ErrorCodes.notFound, `no blob ${id} (blobs last ${BLOB_TTL_MS / 60_000} minutes)`, "blob_id");
    yield create(BlobPartSchema, { kind: { case: "header", value: { size: BigInt(m.size), sha256: m.sha256, name: m.name } } });
    for await (const chunk of readChunks(join(this.dir, id))) yield create(BlobPartSchema, { kind: { case: "chunk", value: chunk } });
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
