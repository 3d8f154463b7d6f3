import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toErrorReport } from "@farm/shared/errors";
import { ActivityLog, type ActivityRow } from "./activity-log.js";
import type { FarmDatabase } from "../db/database.js";
import { sqliteDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { createActivityStore } from "../db/stores.js";

const refused = (p: Promise<unknown>) => p.then(() => null, toErrorReport);

const T = 1_700_000_000_000;
const entry = (serial: string, at: number, command = "RunShell"): Omit<ActivityRow, "id"> => ({ at, caller: "alice", leaseId: "", serial, physicalId: "", agentId: "a1", command, outcome: "ok", durationMs: 1, requestId: "", detail: "" });

describe.each(dialects)("activity pages on %s", (dialect) => {
  let database: FarmDatabase;
  let log: ActivityLog;
  beforeAll(async () => {
    database = await openTestDatabase(dialect);
    log = new ActivityLog(createActivityStore(database));
    // 7 entries on s1 in the same millisecond, 3 on s2, written in this order.
    for (let i = 0; i < 7; i++) await log.record(entry("s1", T, `s1-${i}`));
    for (let i = 0; i < 3; i++) await log.record(entry("s2", T + 10 + i, `s2-${i}`));
  });
  afterAll(() => database.close());

  it("reads newest first by id, in pages that join up without gaps or repeats", async () => {
    const all = (await log.listPage({}, { pageSize: 1000, pageToken: "" })).items.map((r) => r.id);
    expect(all).toHaveLength(10);
    expect(all).toEqual([...all].sort((a, b) => b - a));
    const paged: number[] = [];
    let token = "";
    let pages = 0;
    do {
      const p = await log.listPage({}, { pageSize: 3, pageToken: token });
      paged.push(...p.items.map((r) => r.id));
      token = p.nextPageToken;
      pages++;
    } while (token);
    expect(paged).toEqual(all);
    expect(pages).toBe(4);
  });

  it("neither repeats nor skips when entries are written between page reads", async () => {
    const before = (await log.listPage({ serial: "s1" }, { pageSize: 1000, pageToken: "" })).items.map((r) => r.command);
    const first = await log.listPage({ serial: "s1" }, { pageSize: 2, pageToken: "" });
    // Newer entries (in the same millisecond) arrive while the caller reads: an
    // offset would now point two rows earlier and repeat them.
    await log.record(entry("s1", T, "late-1"));
    await log.record(entry("s1", T, "late-2"));
    const seen = first.items.map((r) => r.command);
    let token = first.nextPageToken;
    while (token) {
      const p = await log.listPage({ serial: "s1" }, { pageSize: 2, pageToken: token });
      seen.push(...p.items.map((r) => r.command));
      token = p.nextPageToken;
    }
    expect(seen).toEqual(before);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it("filters by serial and since, and binds the token to them", async () => {
    const p = await log.listPage({ serial: "s2" }, { pageSize: 2, pageToken: "" });
    expect(p.items.map((r) => r.command)).toEqual(["s2-2", "s2-1"]);
    expect((await log.listPage({ serial: "s2" }, { pageSize: 2, pageToken: p.nextPageToken })).items.map((r) => r.command)).toEqual(["s2-0"]);
    expect(await refused(log.listPage({ serial: "s1" }, { pageSize: 2, pageToken: p.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(await refused(log.listPage({}, { pageSize: 2, pageToken: p.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(await refused(log.listPage({ serial: "s2", sinceMs: T + 11 }, { pageSize: 2, pageToken: p.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    const since = await log.listPage({ serial: "s2", sinceMs: T + 11 }, { pageSize: 1, pageToken: "" });
    expect(since.items.map((r) => r.command)).toEqual(["s2-2"]);
    expect(await log.listPage({ serial: "s2", sinceMs: T + 11 }, { pageSize: 1, pageToken: since.nextPageToken })).toMatchObject({ items: [{ command: "s2-1" }], nextPageToken: "" });
  });

  it("refuses a malformed token and a negative page size", async () => {
    expect(await refused(log.listPage({}, { pageSize: 2, pageToken: "garbage" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(await refused(log.listPage({}, { pageSize: -2, pageToken: "" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_size" });
  });

  it("returns each recorded row with its id, tells the listeners, and counts by outcome", async () => {
    const seen: ActivityRow[] = [];
    log.onRecord((row) => seen.push(row));
    const row = await log.record({ ...entry("s3", T + 100, "Tap"), outcome: "DEVICE_OFFLINE" });
    expect(row).toMatchObject({ id: expect.any(Number), serial: "s3", command: "Tap", outcome: "DEVICE_OFFLINE", at: T + 100 });
    expect(seen).toEqual([row]);
    const counts = await log.countByOutcome();
    expect(counts.find((c) => c.command === "Tap")).toEqual({ command: "Tap", outcome: "DEVICE_OFFLINE", n: 1 });
    expect(counts.filter((c) => c.command.startsWith("s1-")).every((c) => c.n === 1 && c.outcome === "ok")).toBe(true);
    expect(counts.reduce((sum, c) => sum + c.n, 0)).toBe(13);
  });
});

describe("tracking a routed call", () => {
  const database = sqliteDatabase(":memory:");
  const log = new ActivityLog(createActivityStore(database));
  afterAll(() => database.close());
  const tracked = { caller: "bob", leaseId: "l1", serial: "s9", physicalId: "p9", agentId: "a9", command: "Swipe", requestId: "r1", detail: "" };

  it("stores the outcome before answering, an error's code as the outcome", async () => {
    expect(await log.track(tracked, async (e) => ((e.physicalId = "p9b"), 42))).toBe(42);
    const [ok] = (await log.listPage({ serial: "s9" }, { pageSize: 1, pageToken: "" })).items;
    expect(ok).toMatchObject({ command: "Swipe", outcome: "ok", physicalId: "p9b" });
    const err = await log.track(tracked, () => Promise.reject(new Error("boom"))).then(() => null, (e: unknown) => e as Error);
    expect(err?.message).toBe("boom");
    const [failed] = (await log.listPage({ serial: "s9" }, { pageSize: 1, pageToken: "" })).items;
    expect(failed?.outcome).not.toBe("ok");
  });

  it("keeps the call's outcome when the entry cannot be written, and says so", async () => {
    const broken = new ActivityLog({
      insert: () => Promise.reject(new Error("disk full")),
      get: () => Promise.resolve(undefined),
      countByOutcome: () => Promise.resolve([]),
      listBefore: () => Promise.resolve([]),
    });
    const failures: [string, string][] = [];
    broken.onRecordFailure((e, command) => failures.push([(e as Error).message, command]));
    expect(await broken.track(tracked, async () => "done")).toBe("done");
    expect(failures).toEqual([["disk full", "Swipe"]]);
  });
});
