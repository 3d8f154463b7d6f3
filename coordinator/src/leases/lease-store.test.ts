import { afterEach, describe, expect, it } from "vitest";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import type { LeaseStore, Waiter } from "./lease-store.js";
import { createDeviceCleanupStore, createLeaseStore, createSessionStore } from "../db/stores.js";
import { activeLease, runningSession } from "./testing/lease-fixtures.js";

let opened: FarmDatabase | undefined;

afterEach(async () => {
  await opened?.close();
  opened = undefined;
});

const selector = { serial: "", physicalId: "", labels: { rack: "b2" }, model: "Pixel 7", apiLevelMin: 30, apiLevelMax: 0, agent: "" };
const waiter = (ticket: string, seq: number, replicaId: string | null = null, tokenHash: string | null = null): Waiter => ({ ticket, seq, holder: "h", selector, enqueuedAt: 1, waitDeadline: 2, ttlMs: 3, replicaId, tokenHash });
const lease = activeLease;

/** A lease not yet on a phone: the grant at once picks one. */
const unplaced = (leaseId: string) => ({ leaseId, tokenHash: `hash-${leaseId}`, holder: "h", acquiredAt: 1, expiresAt: 2, ttlMs: 1, state: "active" as const, endedAt: null });

describe("SqliteLeaseStore", () => {
  it("reads selectors stored as JSON text (as they always were)", async () => {
    opened = await openTestDatabase("sqlite");
    if (opened.dialect !== "sqlite") throw new Error("unreachable");
    const s = createLeaseStore(opened);
    await s.insertWaiter(waiter("late", 5));
    // A row as the code before typed columns wrote it.
    opened.sqlite
      .prepare("INSERT INTO lease_waiters (ticket, seq, holder, selector, enqueued_at, wait_deadline, ttl_ms) VALUES (?, ?, ?, ?, ?, ?, ?)")
      .run("early", 1, "h", JSON.stringify(selector), 1, 2, 3);
    expect(await s.waiters()).toEqual([waiter("early", 1), waiter("late", 5)]);
    const raw = opened.sqlite.prepare("SELECT selector FROM lease_waiters WHERE ticket = 'late'").get() as { selector: string };
    expect(JSON.parse(raw.selector)).toEqual(selector);
  });
});

describe.each(dialects)("LeaseStore on %s", (dialect) => {
  async function store(): Promise<LeaseStore> {
    opened = await openTestDatabase(dialect);
    return createLeaseStore(opened);
  }

  it("returns waiters in arrival order, selectors as they were stored", async () => {
    const s = await store();
    await s.insertWaiter(waiter("late", 5));
    await s.insertWaiter(waiter("early", 1));
    expect(await s.waiters()).toEqual([waiter("early", 1), waiter("late", 5)]);
    await s.deleteWaiter("early");
    expect(await s.waiters()).toEqual([waiter("late", 5)]);
    await s.setWaiterCaller("late", "r-2", "hash-2");
    expect(await s.waiters()).toEqual([waiter("late", 5, "r-2", "hash-2")]);
  });

  it("drops the granted waiter with the lease, and keeps it when the lease is refused", async () => {
    const s = await store();
    await s.insertWaiter(waiter("t-1", 1));
    await s.insertWaiter(waiter("t-2", 2));
    await s.insertLease(lease("l-1", "pd-1"), "t-1");
    expect((await s.waiters()).map((w) => w.ticket)).toEqual(["t-2"]);
    // A second active lease on the same phone: the database refuses it, and the waiter stays.
    await expect(s.insertLease(lease("l-2", "pd-1"), "t-2")).rejects.toThrow();
    expect((await s.waiters()).map((w) => w.ticket)).toEqual(["t-2"]);
    expect((await s.activeLeases()).map((l) => l.leaseId)).toEqual(["l-1"]);
  });

  it("refuses a second active lease on one phone even when asked at the same moment", async () => {
    const s = await store();
    const tries = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => s.insertLease(lease(`l-${i}`, "pd-1"))));
    expect(tries.filter((t) => t.status === "fulfilled")).toHaveLength(1);
    expect(await s.activeLeases()).toHaveLength(1);
  });

  it("grants at once one free phone of those offered, only while nobody is queued, in one statement", async () => {
    const s = await store();
    const phone = (id: string) => ({ physicalId: id, agentId: "a-1", serial: `S-${id}` });
    const l1 = unplaced("l-1");
    expect(await s.insertLeaseOnAnyFree(l1, [phone("pd-1"), phone("pd-2")])).toEqual(phone("pd-1"));
    // pd-1 is taken: the next free one of those offered.
    const l2 = unplaced("l-2");
    expect(await s.insertLeaseOnAnyFree(l2, [phone("pd-1"), phone("pd-2")])).toEqual(phone("pd-2"));
    // None free.
    const l3 = unplaced("l-3");
    expect(await s.insertLeaseOnAnyFree(l3, [phone("pd-1"), phone("pd-2")])).toBeUndefined();
    // Someone waits: even a free phone goes through the queue.
    await s.insertWaiter(waiter("t-1", 1));
    expect(await s.insertLeaseOnAnyFree(l3, [phone("pd-3")])).toBeUndefined();
    expect((await s.activeLeases()).map((l) => l.leaseId).sort()).toEqual(["l-1", "l-2"]);
    // Ended once only: a second end (another replica's) reports it was already over.
    expect(await s.endLease("l-1", "released", 5)).toBe(true);
    expect(await s.endLease("l-1", "expired", 6)).toBe(false);
    expect(await s.leaseByTokenHash("hash-l-1")).toMatchObject({ state: "released", endedAt: 5 });
  });

  it("grants at once no phone whose cleanup is due, running or failed (a device_cleanup row)", async () => {
    const s = await store();
    const phone = (id: string) => ({ physicalId: id, agentId: "a-1", serial: `S-${id}` });
    const cleanups = createDeviceCleanupStore(opened!);
    await cleanups.put({ physicalId: "pd-1", state: "cleaning", leaseId: "l-0", reason: "", baseline: "", since: 1 });
    expect(await s.insertLeaseOnAnyFree(unplaced("l-1"), [phone("pd-1"), phone("pd-2")])).toEqual(phone("pd-2"));
    expect(await s.insertLeaseOnAnyFree(unplaced("l-2"), [phone("pd-1")])).toBeUndefined();
    await cleanups.delete("pd-1");
    expect(await s.insertLeaseOnAnyFree(unplaced("l-2"), [phone("pd-1")])).toEqual(phone("pd-1"));
  });

  it("releases by token hash in one statement, only for the holder or an admin", async () => {
    const s = await store();
    await s.insertLease(lease("l-1", "pd-1"));
    const holder = (await s.leaseById("l-1"))!.holder;
    expect(await s.releaseByTokenHash("hash-l-1", 7, { tokenName: "mallory", admin: false })).toBeUndefined();
    expect(await s.activeLeaseOf("pd-1")).toMatchObject({ leaseId: "l-1" });
    expect(await s.releaseByTokenHash("hash-l-1", 7, { tokenName: holder, admin: false })).toMatchObject({ leaseId: "l-1", state: "released", endedAt: 7 });
    expect(await s.releaseByTokenHash("hash-l-1", 8)).toBeUndefined();
    expect(await s.activeLeaseOf("pd-1")).toBeUndefined();
  });

  it("renews by token hash in one statement, only for the holder or an admin; ttl 0 keeps the lease's own", async () => {
    const s = await store();
    await s.insertLease(lease("l-1", "pd-1"));
    expect(await s.renewByTokenHash("hash-l-1", 5_000, 100, { tokenName: "mallory", admin: false })).toBeUndefined();
    expect(await s.renewByTokenHash("hash-l-1", 5_000, 100, { tokenName: "h", admin: false })).toMatchObject({ expiresAt: 5_100, ttlMs: 5_000 });
    expect(await s.renewByTokenHash("hash-l-1", 0, 200, { tokenName: "root", admin: true })).toMatchObject({ expiresAt: 5_200, ttlMs: 5_000 });
    await s.endLease("l-1", "released", 300);
    expect(await s.renewByTokenHash("hash-l-1", 0, 400)).toBeUndefined();
  });

  it("renews and ends leases, keeping ended ones findable by token hash", async () => {
    const s = await store();
    await s.insertLease(lease("l-1", "pd-1"));
    await s.renewLease("l-1", 50, 40);
    expect(await s.leaseByTokenHash("hash-l-1")).toMatchObject({ expiresAt: 50, ttlMs: 40, state: "active" });
    await s.endLease("l-1", "expired", 60);
    expect(await s.activeLeases()).toEqual([]);
    expect(await s.leaseByTokenHash("hash-l-1")).toMatchObject({ state: "expired", endedAt: 60 });
    expect(await s.leaseByTokenHash("nope")).toBeUndefined();
    // Ended, the phone can be leased again.
    await s.insertLease(lease("l-2", "pd-1"));
    expect((await s.activeLeases()).map((l) => l.leaseId)).toEqual(["l-2"]);
  });
});

describe("PgLeaseStore: the cycle's statements", () => {
  it("tells in the release statement whether the lease has a running session, and runs the same statements bound to a transaction", async () => {
    opened = await openTestDatabase("postgres");
    const s = createLeaseStore(opened);
    const sessions = createSessionStore(opened);
    const session = runningSession;
    await s.insertLease(lease("l-1", "pd-1"));
    await sessions.insert(session("s-1", "l-1"));
    expect(await s.releaseByTokenHash("hash-l-1", 7)).toMatchObject({ leaseId: "l-1", state: "released", endedAt: 7, acquiredAt: 1, runningSessions: true });
    await s.insertLease(lease("l-2", "pd-1"));
    // A session of this lease that already ended does not count.
    await sessions.insert(session("s-2", "l-2"));
    await sessions.end("s-2", "passed", 8);
    expect(await s.releaseByTokenHash("hash-l-2", 9)).toMatchObject({ leaseId: "l-2", runningSessions: false });
    // Inside the lease lock's transaction the same statements run through it (no pool of their own).
    const phone = { physicalId: "pd-2", agentId: "a-1", serial: "S-2" };
    await s.exclusive(async (tx) => {
      expect(await tx.insertLeaseOnAnyFree(unplaced("l-3"), [phone])).toEqual(phone);
      expect(await tx.renewByTokenHash("hash-l-3", 0, 10)).toMatchObject({ leaseId: "l-3", expiresAt: 11, ttlMs: 1 });
      expect(await tx.releaseByTokenHash("hash-l-3", 12, { tokenName: "h", admin: false })).toMatchObject({ leaseId: "l-3", endedAt: 12, runningSessions: false });
    });
    expect(await s.leaseByTokenHash("hash-l-3")).toMatchObject({ state: "released", endedAt: 12 });
  });
});
