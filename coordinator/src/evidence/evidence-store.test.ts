import { createHash, randomUUID } from "node:crypto";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toErrorReport, type ErrorReport } from "@farm/shared/errors";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { type ByteStore } from "../bytes/byte-store.js";
import { type EvidenceIndexStore } from "./evidence-index-store.js";
import { EvidenceStore, type EvidenceRow } from "./evidence-store.js";
import { stillManifest } from "./testing/still-manifest.js";
import { createByteStore, createEvidenceIndexStore } from "../db/stores.js";

/** The report of what `p` rejects with, or null when it resolves. */
const refused = (p: Promise<unknown>): Promise<ErrorReport | null> => p.then(() => null, (err: unknown) => toErrorReport(err));

const T = 1_700_000_000_000;

describe.each(dialects)("evidence pages on %s", (dialect) => {
  let database: FarmDatabase;
  let index: EvidenceIndexStore;
  // Listing reads only the index; nothing here touches the directory.
  let store: EvidenceStore;
  let bytes: ByteStore;
  beforeAll(async () => {
    database = await openTestDatabase(dialect);
    index = createEvidenceIndexStore(database);
    store = new EvidenceStore(index, tmpdir());
  });
  afterAll(() => database.close());

  async function indexed(createdAt: number, more: Partial<EvidenceRow> = {}): Promise<EvidenceRow> {
    const row: EvidenceRow = { evidenceId: randomUUID(), kind: "still", status: "complete", label: null, serial: "s1", physicalId: "p1", agentId: "a1", createdAt, totalBytes: 1, manifestSha256: "0".repeat(64), ...more };
    await index.insert(row);
    return row;
  }

  type Filter = Parameters<EvidenceStore["listPage"]>[0];
  async function readAll(filter: Filter, pageSize: number, between?: (page: number) => Promise<void>): Promise<{ ids: string[]; pages: number }> {
    const ids: string[] = [];
    let token = "";
    let pages = 0;
    do {
      const p = await store.listPage(filter, { pageSize, pageToken: token });
      ids.push(...p.items.map((r) => r.evidenceId));
      token = p.nextPageToken;
      pages++;
      await between?.(pages);
    } while (token);
    return { ids, pages };
  }

  let expected: string[];
  beforeAll(async () => {
    const rows: EvidenceRow[] = [];
    // Bundles published in the same millisecond are common (a burst of captures).
    for (let i = 0; i < 5; i++) rows.push(await indexed(T));
    rows.push(await indexed(T - 1000), await indexed(T + 1000));
    for (let i = 0; i < 3; i++) rows.push(await indexed(T + i, { status: "failed", serial: "s2", label: "nightly" }));
    expected = rows.sort((a, b) => b.createdAt - a.createdAt || (a.evidenceId < b.evidenceId ? 1 : -1)).map((r) => r.evidenceId);
  });

  it("orders by (created, id) newest first, and pages through equal times without gaps or repeats", async () => {
    expect((await store.listPage({}, { pageSize: 0, pageToken: "" })).items.map((r) => r.evidenceId)).toEqual(expected);
    for (const size of [1, 2, 3, 4]) {
      const { ids, pages } = await readAll({}, size);
      expect(ids, `page size ${size}`).toEqual(expected);
      expect(pages).toBe(Math.ceil(expected.length / size));
    }
  });

  it("compares ids bytewise, as SQLite does, whatever the database's locale", async () => {
    // Upper case sorts before lower case bytewise, after it in most locales; '-' is not ignored.
    const ids = ["A-b", "a-a", "aB", "a_c", "ab"].map((p) => `00000000-0000-0000-0000-0000000000${p}`);
    for (const id of ids) await indexed(T + 7000, { evidenceId: id, serial: "bytes" });
    const bytewise = [...ids].sort((a, b) => (a < b ? 1 : -1));
    expect((await store.listPage({ serial: "bytes" }, { pageSize: 10, pageToken: "" })).items.map((r) => r.evidenceId)).toEqual(bytewise);
    expect((await readAll({ serial: "bytes" }, 2)).ids).toEqual(bytewise);
  });

  it("returns every bundle that was there once, even when new ones are published between reads", async () => {
    const before = (await store.listPage({ serial: "s1" }, { pageSize: 1000, pageToken: "" })).items.map((r) => r.evidenceId);
    const added: string[] = [];
    const { ids } = await readAll({ serial: "s1" }, 2, async () => {
      // Newer bundles, including one in the millisecond the pages are at.
      added.push((await indexed(T + 5000)).evidenceId, (await indexed(T)).evidenceId);
    });
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of before) expect(ids).toContain(id);
    expect(ids.filter((id) => !added.includes(id))).toEqual(before);
  });

  it("applies the filters on every page and binds the token to them", async () => {
    const first = await store.listPage({ status: "failed", label: "nightly" }, { pageSize: 2, pageToken: "" });
    expect(first.items).toHaveLength(2);
    expect(first.items.every((r) => r.status === "failed")).toBe(true);
    const rest = await store.listPage({ status: "failed", label: "nightly" }, { pageSize: 2, pageToken: first.nextPageToken });
    expect(rest.items.map((r) => r.status)).toEqual(["failed"]);
    expect(rest.nextPageToken).toBe("");
    for (const other of [{ status: "complete", label: "nightly" }, { status: "failed" }, { status: "failed", label: "nightly", serial: "s2" }]) {
      expect(await refused(store.listPage(other, { pageSize: 2, pageToken: first.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    }
    // Empty strings (what an unset proto field reads as) are no filter, so the token still fits.
    expect((await store.listPage({ status: "failed", label: "nightly", serial: "" }, { pageSize: 2, pageToken: first.nextPageToken })).items).toHaveLength(1);
  });

  it("refuses a token from another list and a malformed one", async () => {
    const videoLike = Buffer.from(JSON.stringify({ v: 1, f: "x", k: [T, "id"] })).toString("base64url");
    expect(await refused(store.listPage({}, { pageSize: 2, pageToken: videoLike }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(await refused(store.listPage({}, { pageSize: 2, pageToken: "!!" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
  });
});

const sha256 = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

async function readAll(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of chunks) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

const setups = [...dialects.map((d) => [d, "files"] as const), ["postgres", "database"] as const];

describe.each(setups)("publishing a bundle on %s, bytes in %s", (dialect, bytesKind) => {
  let database: FarmDatabase;
  let dataDir: string;
  let store: EvidenceStore;
  let bytes: ByteStore;
  beforeAll(async () => {
    database = await openTestDatabase(dialect);
    dataDir = await mkdtemp(join(tmpdir(), "farm-evidence-"));
    bytes = createByteStore(bytesKind, dataDir, database);
    store = new EvidenceStore(createEvidenceIndexStore(database), dataDir, { bytes, shared: dialect === "postgres" });
    await store.init();
  });
  afterAll(async () => {
    await database.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  const meta = (evidenceId: string) => ({ evidenceId, kind: "still", serial: "s1", physicalId: "p1", agentId: "a1" });

  it("indexes a bundle once its files are in place, and never takes a second one under its id", async () => {
    const id = randomUUID();
    const png = Buffer.from("not really a png");
    const published: EvidenceRow[] = [];
    store.onPublish = (row) => published.push(row);
    const upload = await store.beginUpload(meta(id));
    expect(await refused(store.beginUpload(meta(id)))).toMatchObject({ code: "ALREADY_EXISTS" });
    await upload.startFile("screen.png", png.length, sha256(png));
    await upload.chunk(png);
    expect(await store.get(id)).toBeUndefined();
    const manifest = stillManifest(id, png);
    const row = await upload.finish(manifest);
    expect(row).toMatchObject({ evidenceId: id, kind: "still", status: "complete", label: "smoke", totalBytes: png.length, manifestSha256: sha256(manifest) });
    expect(await store.get(id)).toEqual(row);
    expect(await store.has(id)).toBe(true);
    expect(published).toEqual([row]);
    expect(await readAll(store.read(id, "screen.png"))).toEqual(png);
    expect((await store.manifest(id)).text).toBe(manifest);
    expect(store.receiving.has(id)).toBe(false);
    expect(await refused(store.beginUpload(meta(id)))).toMatchObject({ code: "ALREADY_EXISTS" });
    expect(await store.totals()).toEqual([{ kind: "still", status: "complete", bundles: 1, bytes: png.length }]);
    expect(await store.publishedAmong([id, randomUUID()])).toEqual(new Set([id]));
    expect(await store.require(id)).toEqual(row);
    expect(await refused(store.require(randomUUID()))).toMatchObject({ code: "EVIDENCE_NOT_FOUND" });
  });

  it("leaves nothing listed when a file does not match what was announced", async () => {
    const id = randomUUID();
    const upload = await store.beginUpload(meta(id));
    await upload.startFile("screen.png", 3, sha256("abc"));
    await upload.chunk(Buffer.from("abd"));
    expect(await refused(upload.finish(stillManifest(id, Buffer.from("abc"))))).toMatchObject({ code: "EVIDENCE_TRANSFER_FAILED" });
    await upload.abort();
    expect(await store.get(id)).toBeUndefined();
    expect(await readdir(store.staging)).toEqual([]);
    expect(store.receiving.has(id)).toBe(false);
  });

  it("removes the files of a bundle it could not index, and says which", async () => {
    const id = randomUUID();
    const png = Buffer.from("x");
    const real = createEvidenceIndexStore(database);
    const failing: EvidenceIndexStore = {
      get: (evidenceId) => real.get(evidenceId),
      indexedAmong: (ids) => real.indexedAmong(ids),
      insert: () => Promise.reject(new Error("disk I/O error")),
      totals: () => real.totals(),
      listAfter: (filter, after, limit) => real.listAfter(filter, after, limit),
    };
    const broken = new EvidenceStore(failing, dataDir, { bytes, shared: dialect === "postgres" });
    const upload = await broken.beginUpload(meta(id));
    await upload.startFile("screen.png", png.length, sha256(png));
    await upload.chunk(png);
    const report = await refused(upload.finish(stillManifest(id, png)));
    expect(report).toMatchObject({ code: "EVIDENCE_CAPTURE_FAILED" });
    expect(report?.message).toContain(id);
    await upload.abort();
    expect(await bytes.sizeOf(`evidence/${id}/screen.png`)).toBeUndefined();
    expect(await readdir(broken.staging)).toEqual([]);
    expect(await store.get(id)).toBeUndefined();
  });
});
