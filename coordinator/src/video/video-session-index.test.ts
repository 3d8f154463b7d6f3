import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toErrorReport, type ErrorReport } from "@farm/shared/errors";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { VideoSessionIndex, type VideoSessionRow } from "./video-session-index.js";
import { createVideoSessionStore } from "../db/stores.js";

const refused = (p: Promise<unknown>): Promise<ErrorReport | null> => p.then(() => null, (err: unknown) => toErrorReport(err));

const T = 1_700_000_000_000;
const sessionRow = (createdAt: number, more: Partial<VideoSessionRow> = {}): VideoSessionRow => ({
  sessionId: randomUUID(),
  agentId: "a1",
  serial: "s1",
  physicalId: "p1",
  requestedBy: "alice",
  createdAt,
  updatedAt: createdAt,
  status: "recording",
  code: "",
  message: "",
  workerAvailable: true,
  recoveryState: "",
  manifestJson: "",
  ...more,
});

describe.each(dialects)("video session pages on %s", (dialect) => {
  let database: FarmDatabase;
  let index: VideoSessionIndex;
  let rows: VideoSessionRow[];
  let expected: string[];

  async function session(createdAt: number, more: Partial<VideoSessionRow> = {}): Promise<VideoSessionRow> {
    const row = sessionRow(createdAt, more);
    await index.upsert(row);
    return row;
  }

  type Filter = Parameters<VideoSessionIndex["listPage"]>[0];
  async function readAll(filter: Filter, pageSize: number, between?: () => Promise<void>): Promise<string[]> {
    const ids: string[] = [];
    let token = "";
    do {
      const p = await index.listPage(filter, { pageSize, pageToken: token });
      ids.push(...p.items.map((r) => r.sessionId));
      token = p.nextPageToken;
      await between?.();
    } while (token);
    return ids;
  }

  beforeAll(async () => {
    database = await openTestDatabase(dialect);
    index = new VideoSessionIndex(createVideoSessionStore(database));
    rows = [];
    for (let i = 0; i < 4; i++) rows.push(await session(T));
    rows.push(await session(T - 1), await session(T + 1));
    for (let i = 0; i < 3; i++) rows.push(await session(T, { serial: "s2", status: "complete" }));
    expected = [...rows].sort((a, b) => b.createdAt - a.createdAt || (a.sessionId < b.sessionId ? 1 : -1)).map((r) => r.sessionId);
  });
  afterAll(() => database.close());

  it("orders by (created, session id) newest first and pages through equal times whole", async () => {
    expect((await index.listPage({}, { pageSize: 0, pageToken: "" })).items.map((r) => r.sessionId)).toEqual(expected);
    for (const size of [1, 2, 3]) expect(await readAll({}, size), `page size ${size}`).toEqual(expected);
  });

  it("keeps a session in its place when it is updated between reads, and repeats none when new ones start", async () => {
    let n = 0;
    const ids = await readAll({}, 2, async () => {
      // Each status change bumps updated_at, never created_at: the key stays put.
      const r = rows[n++ % rows.length] as VideoSessionRow;
      await index.upsert({ ...r, status: "finalizing", updatedAt: T + 60_000 + n });
      await session(T + 120_000 + n);
    });
    expect(ids.filter((id) => expected.includes(id))).toEqual(expected);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("binds the token to serial and status", async () => {
    const first = await index.listPage({ serial: "s2", status: "complete" }, { pageSize: 2, pageToken: "" });
    expect(first.items.map((r) => r.serial)).toEqual(["s2", "s2"]);
    expect(await index.listPage({ serial: "s2", status: "complete" }, { pageSize: 2, pageToken: first.nextPageToken })).toMatchObject({ items: [{ serial: "s2" }], nextPageToken: "" });
    expect(await refused(index.listPage({ serial: "s2" }, { pageSize: 2, pageToken: first.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(await refused(index.listPage({ serial: "s1", status: "complete" }, { pageSize: 2, pageToken: first.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(await refused(index.listPage({}, { pageSize: 2, pageToken: "eyJ2IjoxfQ" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
  });

  it("compares session ids bytewise, as SQLite does, whatever the database's locale", async () => {
    const ids = ["A-b", "a-a", "aB", "a_c", "ab"].map((p) => `00000000-0000-0000-0000-0000000000${p}`);
    for (const sessionId of ids) await index.upsert(sessionRow(T + 7000, { sessionId, serial: "bytes" }));
    const bytewise = [...ids].sort((a, b) => (a < b ? 1 : -1));
    expect((await index.listPage({ serial: "bytes" }, { pageSize: 10, pageToken: "" })).items.map((r) => r.sessionId)).toEqual(bytewise);
    expect(await readAll({ serial: "bytes" }, 2)).toEqual(bytewise);
  });
});

describe.each(dialects)("video session updates on %s", (dialect) => {
  let database: FarmDatabase;
  let index: VideoSessionIndex;
  beforeAll(async () => {
    database = await openTestDatabase(dialect);
    index = new VideoSessionIndex(createVideoSessionStore(database));
  });
  afterAll(() => database.close());

  it("stores and gives back a session as it was reported", async () => {
    const row = sessionRow(T, { workerAvailable: false, recoveryState: "resumed", manifestJson: "{}" });
    expect(await index.upsert(row)).toEqual(row);
    expect(await index.get(row.sessionId)).toEqual(row);
    expect(await index.get(randomUUID())).toBeUndefined();
  });

  it("keeps who asked and when, and a finished session finished, telling watchers what it stored", async () => {
    const seen: VideoSessionRow[] = [];
    index.onUpsert = (r) => seen.push(r);
    const first = sessionRow(T);
    await index.upsert(first);
    const later = { ...first, requestedBy: "bob", createdAt: T + 5, updatedAt: T + 10, status: "finalizing", workerAvailable: true };
    expect(await index.upsert(later)).toEqual({ ...later, requestedBy: "alice", createdAt: T });
    const done = { ...first, updatedAt: T + 20, status: "partial", code: "EVIDENCE_CAPTURE_FAILED", message: "record: x", workerAvailable: false, manifestJson: "{\"m\":1}" };
    await index.upsert(done);
    // A late answer from before the end.
    const late = await index.upsert({ ...first, updatedAt: T + 30, status: "recording", code: "", message: "", workerAvailable: true, manifestJson: "" });
    expect(late).toEqual({ ...first, updatedAt: T + 30, status: "partial", code: "EVIDENCE_CAPTURE_FAILED", message: "record: x", workerAvailable: false, manifestJson: "{\"m\":1}" });
    expect(await index.get(first.sessionId)).toEqual(late);
    expect(seen.map((r) => r.status)).toEqual(["recording", "finalizing", "partial", "partial"]);
    expect(seen.at(-1)).toEqual(late);
    // A terminal state may still replace another (the stored bundle's word is final).
    expect((await index.upsert({ ...first, updatedAt: T + 40, status: "complete" })).status).toBe("complete");
    index.onUpsert = undefined;
  });

  it("lets no concurrent write undo the end of a session, also from another coordinator", async () => {
    const first = sessionRow(T);
    await index.upsert(first);
    // Two indexes over one database, as two replicas would have.
    const other = new VideoSessionIndex(createVideoSessionStore(database));
    const writes: Promise<VideoSessionRow>[] = [];
    for (let i = 0; i < 10; i++) {
      writes.push(index.upsert({ ...first, status: "recording", updatedAt: T + i }));
      writes.push(other.upsert({ ...first, status: "finalizing", updatedAt: T + i }));
      if (i === 3) writes.push(other.upsert({ ...first, status: "failed", updatedAt: T + 100, workerAvailable: false }));
    }
    await Promise.all(writes);
    expect((await index.get(first.sessionId))?.status).toBe("failed");
    // A session both first write at once: whichever inserts, the other merges into it.
    for (let i = 0; i < 5; i++) {
      const fresh = sessionRow(T);
      await Promise.all([other.upsert({ ...fresh, status: "complete", workerAvailable: false }), index.upsert({ ...fresh, requestedBy: "bob" }), other.upsert({ ...fresh, requestedBy: "carol" })]);
      expect(await index.get(fresh.sessionId)).toMatchObject({ status: "complete", workerAvailable: false });
    }
  });

  it("tells watchers of one index's writes in the order it stored them", async () => {
    const seen: string[] = [];
    index.onUpsert = (r) => seen.push(`${r.sessionId}:${r.updatedAt}`);
    const rows = Array.from({ length: 4 }, () => sessionRow(T));
    const writes = rows.flatMap((r) => [1, 2, 3].map((u) => index.upsert({ ...r, updatedAt: T + u })));
    await Promise.all(writes);
    expect(seen).toEqual(rows.flatMap((r) => [1, 2, 3].map((u) => `${r.sessionId}:${T + u}`)));
    for (const r of rows) expect((await index.get(r.sessionId))?.updatedAt).toBe(T + 3);
    index.onUpsert = undefined;
  });

  it("counts sessions by status", async () => {
    const fresh = await openTestDatabase(dialect);
    try {
      const counted = new VideoSessionIndex(createVideoSessionStore(fresh));
      expect(await counted.countByStatus()).toEqual([]);
      for (const status of ["recording", "recording", "complete"]) await counted.upsert(sessionRow(T, { status }));
      expect((await counted.countByStatus()).sort((a, b) => a.status.localeCompare(b.status))).toEqual([
        { status: "complete", n: 1 },
        { status: "recording", n: 2 },
      ]);
    } finally {
      await fresh.close();
    }
  });
});
