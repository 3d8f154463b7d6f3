import { afterEach, describe, expect, it } from "vitest";
import type { FarmDatabase } from "./database.js";
import { preparedStatement, storeDbOf } from "./store-db.js";
import { createActivityStore, createBlobIndexStore, createDeviceLabelStore, createEvidenceGrantStore, createEvidenceIndexStore, createStores } from "./stores.js";
import { dialects, openTestDatabase } from "./testing/test-database.js";

let opened: FarmDatabase | undefined;
afterEach(async () => {
  await opened?.close();
  opened = undefined;
});

// Above 2^32 and below 2^53: a PostgreSQL bigint read as text, or cut to 32 bits, shows here.
const BIG = 2 ** 40 + 7;

/**
 * The stores written once for both dialects (Kysely, db/store-db.ts), each
 * on in-memory SQLite and on the run's PostgreSQL: what a caller gets back
 * is the same on both, down to the JS types of numbers.
 */
describe.each(dialects)("stores written once, on %s", (dialect) => {
  async function db(): Promise<FarmDatabase> {
    opened = await openTestDatabase(dialect);
    return opened;
  }

  it("builds every store of the database in one place", async () => {
    const stores = createStores(await db());
    for (const [name, store] of Object.entries(stores)) expect(store, name).toBeTypeOf("object");
    // The same database gets one Kysely instance, whatever builds its stores.
    expect(storeDbOf(opened!)).toBe(storeDbOf(opened!));
  });

  it("device labels: an upsert replaces a key's value and adds the rest in one statement, all or none", async () => {
    const labels = createDeviceLabelStore(await db());
    await labels.upsert([{ physicalId: "pd-1", key: "rack", value: "b2" }, { physicalId: "pd-2", key: "rack", value: "c1" }]);
    await labels.upsert([{ physicalId: "pd-1", key: "rack", value: "b3" }, { physicalId: "pd-1", key: "purpose", value: "ci" }]);
    await labels.upsert([]);
    expect(sortLabels(await labels.of("pd-1"))).toEqual([{ physicalId: "pd-1", key: "purpose", value: "ci" }, { physicalId: "pd-1", key: "rack", value: "b3" }]);
    // A row the table refuses (no value) takes the rest of its statement with it.
    await expect(labels.upsert([{ physicalId: "pd-3", key: "ok", value: "yes" }, { physicalId: "pd-3", key: "bad", value: null as unknown as string }])).rejects.toThrow();
    expect(await labels.of("pd-3")).toEqual([]);
    await labels.delete("pd-1", "rack");
    await labels.delete("pd-9", "rack");
    expect(sortLabels(await labels.all())).toEqual([{ physicalId: "pd-1", key: "purpose", value: "ci" }, { physicalId: "pd-2", key: "rack", value: "c1" }]);
  });

  it("blob index: sizes and sums are numbers, a blob is taken once, old ones are found", async () => {
    const blobs = createBlobIndexStore(await db());
    const row = { id: "b-1", owner: "alice", size: BIG, sha256: "ab".repeat(32), name: "app.apk", createdAt: 1_700_000_000_000 };
    await blobs.insert(row);
    await blobs.insert({ ...row, id: "b-2", size: 5, createdAt: 1_700_000_000_500 });
    await blobs.insert({ ...row, id: "b-3", owner: "bob", size: 9, createdAt: 1_700_000_001_000 });
    await expect(blobs.insert(row)).rejects.toThrow();
    expect(await blobs.get("b-1")).toEqual(row);
    expect(await blobs.get("b-0")).toBeUndefined();
    expect(await blobs.usage("alice")).toBe(BIG + 5);
    expect(await blobs.usage("nobody")).toBe(0);
    expect((await blobs.olderThan(1_700_000_000_600)).sort()).toEqual(["b-1", "b-2"]);
    expect(await blobs.take("b-1")).toEqual(row);
    expect(await blobs.take("b-1")).toBeUndefined();
    await blobs.clear();
    expect(await blobs.get("b-3")).toBeUndefined();
  });

  it("evidence grants: an id is issued once, and a user's stored bytes sum their indexed bundles only", async () => {
    const database = await db();
    const grants = createEvidenceGrantStore(database);
    const index = createEvidenceIndexStore(database);
    const grant = { evidenceId: "e-1", kind: "still" as const, agentId: "a-1", agentToken: "agent-a", serial: "S-1", physicalId: "pd-1", requestedBy: "alice", issuedAt: 1_700_000_000_000 };
    await grants.insert(grant);
    await grants.insert({ ...grant, evidenceId: "e-2", kind: "video" });
    await grants.insert({ ...grant, evidenceId: "e-3" });
    await grants.insert({ ...grant, evidenceId: "e-4", requestedBy: "bob" });
    await expect(grants.insert(grant)).rejects.toThrow();
    expect(await grants.get("e-2")).toEqual({ ...grant, evidenceId: "e-2", kind: "video" });
    expect(await grants.get("e-9")).toBeUndefined();
    expect(await grants.storedBytes("alice")).toBe(0);
    const bundle = { kind: "still", status: "complete", label: null, serial: "S-1", physicalId: "pd-1", agentId: "a-1", createdAt: 1, manifestSha256: "cd".repeat(32) };
    await index.insert({ ...bundle, evidenceId: "e-1", totalBytes: BIG });
    await index.insert({ ...bundle, evidenceId: "e-2", totalBytes: 100 });
    await index.insert({ ...bundle, evidenceId: "e-4", totalBytes: 7 });
    expect(await grants.storedBytes("alice")).toBe(BIG + 100);
    expect(await grants.storedBytes("bob")).toBe(7);
    expect(await grants.storedBytes("carol")).toBe(0);
  });

  it("evidence index: pages newest first with ids in byte order, totals are numbers", async () => {
    const index = createEvidenceIndexStore(await db());
    const bundle = { kind: "still", status: "complete", label: null, serial: "S-1", physicalId: "pd-1", agentId: "a-1", createdAt: 2_000, totalBytes: BIG, manifestSha256: "cd".repeat(32) };
    // One millisecond, ids differing in case: bytewise, "B" < "a" < "b".
    for (const id of ["a-1", "B-1", "b-0"]) await index.insert({ ...bundle, evidenceId: id });
    await index.insert({ ...bundle, evidenceId: "old", createdAt: 1_000, status: "partial", label: "smoke", totalBytes: 3 });
    await index.insert({ ...bundle, evidenceId: "other", serial: "S-2", kind: "video" });
    await expect(index.insert({ ...bundle, evidenceId: "a-1" })).rejects.toThrow();
    const ids = async (filter: object, after?: readonly [number, string], limit = 10) => (await index.listAfter(filter, after, limit)).map((r) => r.evidenceId);
    expect(await ids({ serial: "S-1" })).toEqual(["b-0", "a-1", "B-1", "old"]);
    expect(await ids({ serial: "S-1" }, [2_000, "a-1"])).toEqual(["B-1", "old"]);
    expect(await ids({ serial: "S-1" }, undefined, 2)).toEqual(["b-0", "a-1"]);
    expect(await ids({ status: "partial", label: "smoke" })).toEqual(["old"]);
    expect(await index.get("old")).toEqual({ ...bundle, evidenceId: "old", createdAt: 1_000, status: "partial", label: "smoke", totalBytes: 3 });
    expect([...(await index.indexedAmong(["a-1", "nope", "other"]))].sort()).toEqual(["a-1", "other"]);
    expect(await index.indexedAmong([])).toEqual(new Set());
    const totals = (await index.totals()).sort((a, b) => (a.kind + a.status < b.kind + b.status ? -1 : 1));
    expect(totals).toEqual([
      { kind: "still", status: "complete", bundles: 3, bytes: 3 * BIG },
      { kind: "still", status: "partial", bundles: 1, bytes: 3 },
      { kind: "video", status: "complete", bundles: 1, bytes: BIG },
    ]);
  });

  it("activity: each column of the prepared insert gets its own value, ids ascend, counts are numbers", async () => {
    const activity = createActivityStore(await db());
    // Every field distinct, so a value bound to the wrong column shows.
    const e = { at: BIG, caller: "c-caller", leaseId: "c-lease", serial: "c-serial", physicalId: "c-pd", agentId: "c-agent", command: "c-command", outcome: "c-outcome", durationMs: 3, requestId: "c-request", detail: "c-detail" };
    const first = await activity.insert(e);
    const second = await activity.insert({ ...e, serial: "other", outcome: "DEVICE_OFFLINE", durationMs: 4 });
    const third = await activity.insert({ ...e, at: 5 });
    expect(first).toEqual({ ...e, id: first.id });
    expect(typeof first.id).toBe("number");
    expect(second.id).toBeGreaterThan(first.id);
    expect(await activity.get(second.id)).toEqual({ ...e, serial: "other", outcome: "DEVICE_OFFLINE", durationMs: 4, id: second.id });
    expect(sortCounts(await activity.countByOutcome())).toEqual([
      { command: "c-command", outcome: "DEVICE_OFFLINE", n: 1 },
      { command: "c-command", outcome: "c-outcome", n: 2 },
    ]);
    expect((await activity.listBefore({ serial: "c-serial" }, undefined, 10)).map((r) => r.id)).toEqual([third.id, first.id]);
    expect((await activity.listBefore({ serial: "c-serial", sinceMs: 6 }, undefined, 10)).map((r) => r.id)).toEqual([first.id]);
    expect((await activity.listBefore({}, third.id, 1)).map((r) => r.id)).toEqual([second.id]);
  });

  it("refuses to prepare a statement whose value is not passed through as it is", async () => {
    const sdb = storeDbOf(await db());
    // `at + 1` is computed from the marker, so no parameter carries `at`: binding it would put a wrong value in.
    expect(() => preparedStatement<{ at: number; caller: string }, unknown>(sdb, ["at", "caller"], (p) => sdb.selectFrom("activity").selectAll().where("at", "=", p.at + 1).where("caller", "=", p.caller))).toThrow(
      /\bat\b.*not bound/,
    );
  });
});

function sortLabels<T extends { physicalId: string; key: string }>(rows: T[]): T[] {
  return [...rows].sort((a, b) => a.physicalId.localeCompare(b.physicalId) || a.key.localeCompare(b.key));
}

function sortCounts<T extends { command: string; outcome: string }>(rows: T[]): T[] {
  return [...rows].sort((a, b) => (a.command + a.outcome < b.command + b.outcome ? -1 : 1));
}
