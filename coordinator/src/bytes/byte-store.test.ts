import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readdir, rm, stat, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { type ByteStore } from "./byte-store.js";
import { STORED_CHUNK_BYTES } from "./stored-file-store.js";
import { createByteStore } from "../db/stores.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "farm-bytes-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function storeOf(where: "files" | (typeof dialects)[number]): Promise<{ store: ByteStore; dir: string; database?: FarmDatabase }> {
  const dir = await tempDir();
  const database = await openTestDatabase(where === "files" ? "sqlite" : where);
  cleanups.push(() => database.close());
  return { store: createByteStore(where === "files" ? "files" : "database", join(dir, "data"), database), dir, database };
}

async function localFile(dir: string, name: string, bytes: Uint8Array): Promise<{ file: string; meta: { size: number; sha256: string } }> {
  const file = join(dir, name);
  await writeFile(file, bytes);
  return { file, meta: { size: bytes.length, sha256: createHash("sha256").update(bytes).digest("hex") } };
}

async function readAll(it: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of it) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

function codeOf(err: unknown): string {
  return ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.code ?? "";
}

describe.each(["files", ...dialects] as const)("the byte store (%s)", (where) => {
  it("takes a file in whole, reads it back and any range of it across chunk edges, and removes it", async () => {
    const { store, dir } = await storeOf(where);
    const bytes = randomBytes(2 * STORED_CHUNK_BYTES + 12_345);
    const { file, meta } = await localFile(dir, "in.bin", bytes);
    await store.adopt("blobs/one", file, meta);
    // The local file was handed over.
    await expect(stat(file)).rejects.toMatchObject({ code: "ENOENT" });
    expect(await store.sizeOf("blobs/one")).toBe(bytes.length);
    expect((await readAll(store.read("blobs/one"))).equals(bytes)).toBe(true);
    for (const [start, end] of [[0, 1], [STORED_CHUNK_BYTES - 3, STORED_CHUNK_BYTES + 5], [2 * STORED_CHUNK_BYTES + 100, bytes.length], [5, 5]] as const) {
      expect((await readAll(store.read("blobs/one", { start, end }))).equals(bytes.subarray(start, end))).toBe(true);
    }
    await store.remove("blobs/one");
    expect(await store.sizeOf("blobs/one")).toBeUndefined();
    await expect(readAll(store.read("blobs/one"))).rejects.toSatisfy((e) => codeOf(e) === "NOT_FOUND");
  });

  it("keeps a key already stored as it is (content-addressed files), and still takes the local file away", async () => {
    const { store, dir } = await storeOf(where);
    const first = await localFile(dir, "a", Buffer.from("first"));
    await store.adopt("session-images/ab/x.png", first.file, first.meta);
    const second = await localFile(dir, "b", Buffer.from("second"));
    await store.adopt("session-images/ab/x.png", second.file, second.meta);
    expect((await readAll(store.read("session-images/ab/x.png"))).toString()).toBe("first");
    await expect(stat(second.file)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("takes a directory in under a prefix, replacing what was there, and removes only what is under that prefix", async () => {
    const { store, dir } = await storeOf(where);
    const stale = await localFile(dir, "stale", Buffer.from("stale"));
    await store.adopt("evidence/e1/old.txt", stale.file, stale.meta);
    const neighbour = await localFile(dir, "n", Buffer.from("neighbour"));
    await store.adopt("evidence/e10/manifest.json", neighbour.file, neighbour.meta);
    const bundle = join(dir, "bundle");
    await mkdir(bundle);
    const files = new Map<string, { size: number; sha256: string }>();
    for (const [name, text] of [["manifest.json", "{}"], ["screen.png", "png-bytes"]] as const) files.set(name, (await localFile(bundle, name, Buffer.from(text))).meta);
    await store.adoptDir("evidence/e1", bundle, files);
    await expect(stat(bundle)).rejects.toMatchObject({ code: "ENOENT" });
    expect((await readAll(store.read("evidence/e1/screen.png"))).toString()).toBe("png-bytes");
    expect(await store.sizeOf("evidence/e1/old.txt")).toBeUndefined();
    await store.removeUnder("evidence/e1");
    expect(await store.sizeOf("evidence/e1/manifest.json")).toBeUndefined();
    // "evidence/e10" shares the text "evidence/e1" but not the directory.
    expect(await store.sizeOf("evidence/e10/manifest.json")).toBe(9);
  });

  it("refuses a key that could leave the store, before touching anything", async () => {
    const { store, dir } = await storeOf(where);
    const f = await localFile(dir, "f", Buffer.from("x"));
    for (const key of ["../escape", "/abs", "a//b", "a/./b", ""]) {
      await expect(store.adopt(key, f.file, f.meta)).rejects.toSatisfy((e) => codeOf(e) === "INVALID_ARGUMENT");
    }
    // The local file is still the caller's, and nothing was made beside it.
    expect(await readdir(dir)).toEqual(["f"]);
  });
});
