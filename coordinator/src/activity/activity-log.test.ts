import { afterAll, describe, expect, it } from "vitest";
import { ActivityLog, type ActivityRow } from "./activity-log.js";
import { openDatabase } from "../db/open-database.js";
import { refusal } from "@farm/shared/testing/refusal";

const opened = openDatabase(":memory:");
const log = new ActivityLog(opened.db);
afterAll(() => opened.close());

const T = 1_700_000_000_000;
const entry = (serial: string, at: number, command = "RunShell"): Omit<ActivityRow, "id"> => ({ at, caller: "alice", leaseId: "", serial, physicalId: "", agentId: "a1", command, outcome: "ok", durationMs: 1, requestId: "", detail: "" });

describe("activity pages", () => {
  // 7 entries on s1 in the same millisecond, 3 on s2, written in this order.
  for (let i = 0; i < 7; i++) log.record(entry("s1", T, `s1-${i}`));
  for (let i = 0; i < 3; i++) log.record(entry("s2", T + 10 + i, `s2-${i}`));

  it("reads newest first by id, in pages that join up without gaps or repeats", () => {
    const all = log.listPage({}, { pageSize: 1000, pageToken: "" }).items.map((r) => r.id);
    expect(all).toHaveLength(10);
    expect(all).toEqual([...all].sort((a, b) => b - a));
    const paged: number[] = [];
    let token = "";
    let pages = 0;
    do {
      const p = log.listPage({}, { pageSize: 3, pageToken: token });
      paged.push(...p.items.map((r) => r.id));
      token = p.nextPageToken;
      pages++;
    } while (token);
    expect(paged).toEqual(all);
    expect(pages).toBe(4);
  });

  it("neither repeats nor skips when entries are written between page reads", () => {
    const before = log.listPage({ serial: "s1" }, { pageSize: 1000, pageToken: "" }).items.map((r) => r.command);
    const first = log.listPage({ serial: "s1" }, { pageSize: 2, pageToken: "" });
    // Newer entries (in the same millisecond) arrive while the caller reads: an
    // offset would now point two rows earlier and repeat them.
    log.record(entry("s1", T, "late-1"));
    log.record(entry("s1", T, "late-2"));
    const seen = first.items.map((r) => r.command);
    let token = first.nextPageToken;
    while (token) {
      const p = log.listPage({ serial: "s1" }, { pageSize: 2, pageToken: token });
      seen.push(...p.items.map((r) => r.command));
      token = p.nextPageToken;
    }
    expect(seen).toEqual(before);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it("filters by serial and since, and binds the token to them", () => {
    const p = log.listPage({ serial: "s2" }, { pageSize: 2, pageToken: "" });
    expect(p.items.map((r) => r.command)).toEqual(["s2-2", "s2-1"]);
    expect(log.listPage({ serial: "s2" }, { pageSize: 2, pageToken: p.nextPageToken }).items.map((r) => r.command)).toEqual(["s2-0"]);
    expect(refusal(() => log.listPage({ serial: "s1" }, { pageSize: 2, pageToken: p.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(refusal(() => log.listPage({}, { pageSize: 2, pageToken: p.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(refusal(() => log.listPage({ serial: "s2", sinceMs: T + 11 }, { pageSize: 2, pageToken: p.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    const since = log.listPage({ serial: "s2", sinceMs: T + 11 }, { pageSize: 1, pageToken: "" });
    expect(since.items.map((r) => r.command)).toEqual(["s2-2"]);
    expect(log.listPage({ serial: "s2", sinceMs: T + 11 }, { pageSize: 1, pageToken: since.nextPageToken })).toMatchObject({ items: [{ command: "s2-1" }], nextPageToken: "" });
  });

  it("refuses a malformed token and a negative page size", () => {
    expect(refusal(() => log.listPage({}, { pageSize: 2, pageToken: "garbage" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(refusal(() => log.listPage({}, { pageSize: -2, pageToken: "" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_size" });
  });
});
