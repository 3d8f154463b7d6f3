import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { fileAsBlobParts } from "@farm/shared/blob-parts";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import type { BlobPart } from "@farm/shared/gen/farm/v1/blob_pb";
import { type ByteStoreKind } from "../bytes/byte-store.js";
import type { FarmDatabase } from "../db/database.js";
import { openTestDatabase } from "../db/testing/test-database.js";
import { BLOB_TTL_MS, BlobStore } from "./blob-store.js";
import { createBlobIndexStore, createByteStore } from "../db/stores.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "farm-blobs-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function codeOf(err: unknown): string {
  return ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.code ?? "";
}

async function bytesOf(parts: AsyncIterable<BlobPart>): Promise<{ header?: { size: bigint; sha256: string; name: string }; body: Buffer }> {
  let header;
  const body: Buffer[] = [];
  for await (const p of parts) {
    if (p.kind.case === "header") header = p.kind.value;
    else if (p.kind.case === "chunk") body.push(Buffer.from(p.kind.value));
  }
  return { ...(header ? { header } : {}), body: Buffer.concat(body) };
}

const setups: [dialect: "sqlite" | "postgres", bytes: ByteStoreKind][] = [
  ["sqlite", "files"],
  ["postgres", "database"],
  ["postgres", "files"],
];

describe.each(setups)("blobs on %s, bytes in %s", (dialect, kind) => {
  /** Two coordinators on one database (replicas on PostgreSQL); on files they share the data dir, as a shared mount. */
  async function pair(quotaBytes?: number): Promise<{ a: BlobStore; b: BlobStore; database: FarmDatabase; work: string }> {
    const database = await openTestDatabase(dialect);
    cleanups.push(() => database.close());
    const work = await tempDir();
    const shared = dialect === "postgres";
    const make = async (name: string) => {
      const dataDir = kind === "files" ? join(work, "shared") : join(work, name);
      const store = new BlobStore(dataDir, { index: createBlobIndexStore(database), bytes: createByteStore(kind, dataDir, database), shared, ...(quotaBytes ? { quotaBytes } : {}) });
      await store.init();
      return store;
    };
    return { a: await make("a"), b: await make("b"), database, work };
  }

  async function upload(store: BlobStore, work: string, bytes: Buffer, owner: string): Promise<string> {
    const file = join(work, `up-${randomBytes(4).toString("hex")}`);
    await writeFile(file, bytes);
    return store.put(fileAsBlobParts(file, "app.apk"), owner);
  }

  it("serves a blob with its checked header wherever it was uploaded, and hands it to one taker only", async () => {
    const { a, b, work } = await pair();
    const bytes = randomBytes(1024 * 1024 + 77);
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    const id = await upload(a, work, bytes, "user:alice");
    const got = await bytesOf(b.get(id));
    expect(got.header).toMatchObject({ size: BigInt(bytes.length), sha256, name: "app.apk" });
    expect(got.body.equals(bytes)).toBe(true);
    await expect(b.peek(id, "user:bob")).rejects.toSatisfy((e) => codeOf(e) === "NOT_FOUND");
    expect(await b.peek(id, "user:alice")).toEqual({ size: bytes.length, sha256 });
    const taken = await b.take(id, "user:alice");
    expect(taken).toMatchObject({ size: bytes.length, sha256 });
    expect((await readFile(taken.file)).equals(bytes)).toBe(true);
    await expect(a.take(id, "user:alice")).rejects.toSatisfy((e) => codeOf(e) === "NOT_FOUND");
    await expect(bytesOf(a.get(id))).rejects.toSatisfy((e) => codeOf(e) === "NOT_FOUND");
  });

  it("counts an owner's blobs against one quota wherever they were uploaded, before reading the bytes", async () => {
    const { a, b, work } = await pair(3000);
    await upload(a, work, randomBytes(2000), "user:alice");
    await expect(upload(b, work, randomBytes(1500), "user:alice")).rejects.toSatisfy((e) => codeOf(e) === "QUOTA_EXCEEDED");
    // Another owner's quota is their own.
    await upload(b, work, randomBytes(1500), "user:bob");
    expect(await b.usage("user:alice")).toBe(2000);
  });

  it("drops expired blobs on sweep, and a coordinator starting keeps other replicas' blobs (a lone one starts afresh)", async () => {
    const { a, b, work } = await pair();
    const old = await upload(a, work, Buffer.from("old"), "user:alice");
    await b.sweep(Date.now() + BLOB_TTL_MS + 1000);
    await expect(a.peek(old, "user:alice")).rejects.toSatisfy((e) => codeOf(e) === "NOT_FOUND");
    const kept = await upload(a, work, Buffer.from("kept"), "user:alice");
    await b.init();
    if (dialect === "postgres") expect((await bytesOf(a.get(kept))).body.toString()).toBe("kept");
    else await expect(a.peek(kept, "user:alice")).rejects.toSatisfy((e) => codeOf(e) === "NOT_FOUND");
  });

  it("refuses a blob whose bytes do not match its header, and lists nothing", async () => {
    const { a, work } = await pair();
    async function* lying(): AsyncGenerator<BlobPart> {
      for await (const p of fileAsBlobParts(
        await (async () => {
          const f = join(work, "lie");
          await writeFile(f, "honest");
          return f;
        })(),
      )) {
        yield p.kind.case === "chunk" ? { ...p, kind: { case: "chunk", value: Buffer.from("dishonest") } } : p;
      }
    }
    await expect(a.put(lying(), "user:alice")).rejects.toSatisfy((e) => codeOf(e) === "EVIDENCE_TRANSFER_FAILED");
    expect(await a.usage("user:alice")).toBe(0);
  });
});
