import { afterEach, describe, expect, it } from "vitest";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import type { SessionRow } from "./session-store.js";
import { SqliteSessionStore } from "./sqlite-session-store.js";

let opened: OpenedDatabase | undefined;
afterEach(() => {
  opened?.close();
  opened = undefined;
});

const row = (over: Partial<SessionRow>): SessionRow => ({
  sessionId: "s-1",
  name: "n",
  physicalId: "pd-1",
  serial: "S-1",
  agentId: "a-1",
  leaseId: "l-1",
  owner: "alice",
  status: "running",
  createdAt: 100,
  endedAt: null,
  stepCount: 0,
  failedStepCount: 0,
  policyJson: "",
  policySha256: "",
  secretNames: [],
  context: { nested: { list: [1, "two", null] } },
  ocr: false,
  ...over,
});

describe("SqliteSessionStore", () => {
  it("round-trips a row, context JSON included", () => {
    opened = openDatabase(":memory:");
    const store = new SqliteSessionStore(opened.db);
    store.insert(row({}));
    expect(store.get("s-1")).toEqual(row({}));
    expect(store.get("s-2")).toBeUndefined();
  });

  it("ends a running row exactly once", () => {
    opened = openDatabase(":memory:");
    const store = new SqliteSessionStore(opened.db);
    store.insert(row({}));
    expect(store.end("s-1", "passed", 200)).toMatchObject({ status: "passed", endedAt: 200 });
    expect(store.end("s-1", "lease_ended", 300)).toBeUndefined();
    expect(store.get("s-1")).toMatchObject({ status: "passed", endedAt: 200 });
  });

  it("lists running rows per lease, and pages strictly after a key, newest first", () => {
    opened = openDatabase(":memory:");
    const store = new SqliteSessionStore(opened.db);
    store.insert(row({ sessionId: "a", createdAt: 1 }));
    store.insert(row({ sessionId: "b", createdAt: 2, leaseId: "l-2" }));
    store.insert(row({ sessionId: "c", createdAt: 2 }));
    store.insert(row({ sessionId: "d", createdAt: 3, status: "failed", endedAt: 4 }));
    expect(store.running("l-1").map((r) => r.sessionId)).toEqual(["a", "c"]);
    expect(store.running().map((r) => r.sessionId)).toEqual(["a", "b", "c"]);
    expect(store.listAfter({}, undefined, 10).map((r) => r.sessionId)).toEqual(["d", "c", "b", "a"]);
    expect(store.listAfter({}, [2, "c"], 10).map((r) => r.sessionId)).toEqual(["b", "a"]);
    expect(store.listAfter({ status: "running" }, undefined, 2).map((r) => r.sessionId)).toEqual(["c", "b"]);
  });
});
