import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { openDatabase } from "../db/open-database.js";
import { VideoSessionIndex, type VideoSessionRow } from "./video-session-index.js";
import { refusal } from "@farm/shared/testing/refusal";

const opened = openDatabase(":memory:");
const index = new VideoSessionIndex(opened.db);
afterAll(() => opened.close());

const T = 1_700_000_000_000;
function session(createdAt: number, more: Partial<VideoSessionRow> = {}): VideoSessionRow {
  const row: VideoSessionRow = { sessionId: randomUUID(), agentId: "a1", serial: "s1", physicalId: "p1", requestedBy: "alice", createdAt, updatedAt: createdAt, status: "recording", code: "", message: "", workerAvailable: true, recoveryState: "", manifestJson: "", ...more };
  index.upsert(row);
  return row;
}

type Filter = Parameters<VideoSessionIndex["listPage"]>[0];
function readAll(filter: Filter, pageSize: number, between?: () => void): string[] {
  const ids: string[] = [];
  let token = "";
  do {
    const p = index.listPage(filter, { pageSize, pageToken: token });
    ids.push(...p.items.map((r) => r.sessionId));
    token = p.nextPageToken;
    between?.();
  } while (token);
  return ids;
}

describe("video session pages", () => {
  const rows = [...Array.from({ length: 4 }, () => session(T)), session(T - 1), session(T + 1), ...Array.from({ length: 3 }, () => session(T, { serial: "s2", status: "complete" }))];
  const expected = [...rows].sort((a, b) => b.createdAt - a.createdAt || (a.sessionId < b.sessionId ? 1 : -1)).map((r) => r.sessionId);

  it("orders by (created, session id) newest first and pages through equal times whole", () => {
    expect(index.listPage({}, { pageSize: 0, pageToken: "" }).items.map((r) => r.sessionId)).toEqual(expected);
    for (const size of [1, 2, 3]) expect(readAll({}, size), `page size ${size}`).toEqual(expected);
  });

  it("keeps a session in its place when it is updated between reads, and repeats none when new ones start", () => {
    let n = 0;
    const ids = readAll({}, 2, () => {
      // Each status change bumps updated_at, never created_at: the key stays put.
      const r = rows[n++ % rows.length] as VideoSessionRow;
      index.upsert({ ...r, status: "finalizing", updatedAt: T + 60_000 + n });
      session(T + 120_000 + n);
    });
    expect(ids.filter((id) => expected.includes(id))).toEqual(expected);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("binds the token to serial and status", () => {
    const first = index.listPage({ serial: "s2", status: "complete" }, { pageSize: 2, pageToken: "" });
    expect(first.items.map((r) => r.serial)).toEqual(["s2", "s2"]);
    expect(index.listPage({ serial: "s2", status: "complete" }, { pageSize: 2, pageToken: first.nextPageToken })).toMatchObject({ items: [{ serial: "s2" }], nextPageToken: "" });
    expect(refusal(() => index.listPage({ serial: "s2" }, { pageSize: 2, pageToken: first.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(refusal(() => index.listPage({ serial: "s1", status: "complete" }, { pageSize: 2, pageToken: first.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(refusal(() => index.listPage({}, { pageSize: 2, pageToken: "eyJ2IjoxfQ" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
  });
});
