import { afterEach, describe, expect, it } from "vitest";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { type SessionRow, type SessionStore } from "./session-store.js";
import { createSessionStore } from "../db/stores.js";

let opened: FarmDatabase | undefined;
afterEach(async () => {
  await opened?.close();
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

describe.each(dialects)("SessionStore on %s", (dialect) => {
  async function store(): Promise<SessionStore> {
    opened = await openTestDatabase(dialect);
    return createSessionStore(opened);
  }

  it("round-trips a row, context and secret names as plain values", async () => {
    const s = await store();
    const full = row({ context: { nested: { list: [1, "two", null], f: 1.5, t: true }, "ü": "✓" }, secretNames: ["A", "B"], ocr: true, createdAt: 1_700_000_000_123 });
    await s.insert(full);
    expect(await s.get("s-1")).toEqual(full);
    expect(await s.get("s-2")).toBeUndefined();
  });

  it("refuses a second row with the same id", async () => {
    const s = await store();
    await s.insert(row({}));
    await expect(s.insert(row({ name: "again" }))).rejects.toThrow();
    expect((await s.get("s-1"))?.name).toBe("n");
  });

  it("ends a running row exactly once", async () => {
    const s = await store();
    await s.insert(row({}));
    expect(await s.end("s-1", "passed", 200)).toMatchObject({ status: "passed", endedAt: 200 });
    expect(await s.end("s-1", "lease_ended", 300)).toBeUndefined();
    expect(await s.end("nope", "failed", 300)).toBeUndefined();
    expect(await s.get("s-1")).toMatchObject({ status: "passed", endedAt: 200 });
  });

  it("ends a row once when two ends race", async () => {
    const s = await store();
    await s.insert(row({}));
    const both = await Promise.all([s.end("s-1", "passed", 200), s.end("s-1", "lease_ended", 300)]);
    expect(both.filter((r) => r !== undefined)).toHaveLength(1);
  });

  it("lists running rows per lease, and pages strictly after a key, newest first", async () => {
    const s = await store();
    await s.insert(row({ sessionId: "a", createdAt: 1 }));
    await s.insert(row({ sessionId: "b", createdAt: 2, leaseId: "l-2" }));
    await s.insert(row({ sessionId: "c", createdAt: 2 }));
    await s.insert(row({ sessionId: "d", createdAt: 3, status: "failed", endedAt: 4, owner: "bob", physicalId: "pd-2" }));
    expect((await s.running("l-1")).map((r) => r.sessionId)).toEqual(["a", "c"]);
    expect((await s.running()).map((r) => r.sessionId)).toEqual(["a", "b", "c"]);
    expect((await s.listAfter({}, undefined, 10)).map((r) => r.sessionId)).toEqual(["d", "c", "b", "a"]);
    expect((await s.listAfter({}, [2, "c"], 10)).map((r) => r.sessionId)).toEqual(["b", "a"]);
    expect((await s.listAfter({ status: "running" }, undefined, 2)).map((r) => r.sessionId)).toEqual(["c", "b"]);
    expect((await s.listAfter({ owner: "bob" }, undefined, 10)).map((r) => r.sessionId)).toEqual(["d"]);
    expect((await s.listAfter({ physicalId: "pd-1", owner: "alice" }, [2, "b"], 10)).map((r) => r.sessionId)).toEqual(["a"]);
  });
});
