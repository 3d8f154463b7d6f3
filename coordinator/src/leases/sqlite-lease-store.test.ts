import { afterEach, describe, expect, it } from "vitest";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import type { LeaseRow, Waiter } from "./lease-store.js";
import { SqliteLeaseStore } from "./sqlite-lease-store.js";

let opened: OpenedDatabase | undefined;

afterEach(() => {
  opened?.close();
  opened = undefined;
});

const selector = { serial: "", physicalId: "", labels: { rack: "b2" }, model: "Pixel 7", apiLevelMin: 30, apiLevelMax: 0, agent: "" };
const waiter = (ticket: string, seq: number): Waiter => ({ ticket, seq, holder: "h", selector, enqueuedAt: 1, waitDeadline: 2, ttlMs: 3 });
const lease = (leaseId: string, physicalId: string): LeaseRow => ({
  leaseId, tokenHash: `hash-${leaseId}`, holder: "h", physicalId, agentId: "a-1", serial: "S-1", acquiredAt: 1, expiresAt: 2, ttlMs: 1, state: "active", endedAt: null,
});

function store(): SqliteLeaseStore {
  opened = openDatabase(":memory:");
  return new SqliteLeaseStore(opened.db);
}

describe("SqliteLeaseStore", () => {
  it("returns waiters in arrival order, reading selectors stored as JSON text (as they always were)", () => {
    const s = store();
    s.insertWaiter(waiter("late", 5));
    // A row as the code before typed columns wrote it.
    opened?.sqlite
      .prepare("INSERT INTO lease_waiters (ticket, seq, holder, selector, enqueued_at, wait_deadline, ttl_ms) VALUES (?, ?, ?, ?, ?, ?, ?)")
      .run("early", 1, "h", JSON.stringify(selector), 1, 2, 3);
    expect(s.waiters()).toEqual([waiter("early", 1), waiter("late", 5)]);
    const raw = opened?.sqlite.prepare("SELECT selector FROM lease_waiters WHERE ticket = 'late'").get() as { selector: string };
    expect(JSON.parse(raw.selector)).toEqual(selector);
  });

  it("drops the granted waiter with the lease, and keeps it when the lease is refused", () => {
    const s = store();
    s.insertWaiter(waiter("t-1", 1));
    s.insertWaiter(waiter("t-2", 2));
    s.insertLease(lease("l-1", "pd-1"), "t-1");
    expect(s.waiters().map((w) => w.ticket)).toEqual(["t-2"]);
    // A second active lease on the same phone: the database refuses it, and the waiter stays.
    expect(() => s.insertLease(lease("l-2", "pd-1"), "t-2")).toThrow(/UNIQUE/);
    expect(s.waiters().map((w) => w.ticket)).toEqual(["t-2"]);
    expect(s.activeLeases().map((l) => l.leaseId)).toEqual(["l-1"]);
  });

  it("renews and ends leases, keeping ended ones findable by token hash", () => {
    const s = store();
    s.insertLease(lease("l-1", "pd-1"));
    s.renewLease("l-1", 50, 40);
    expect(s.leaseByTokenHash("hash-l-1")).toMatchObject({ expiresAt: 50, ttlMs: 40, state: "active" });
    s.endLease("l-1", "expired", 60);
    expect(s.activeLeases()).toEqual([]);
    expect(s.leaseByTokenHash("hash-l-1")).toMatchObject({ state: "expired", endedAt: 60 });
    // Ended, the phone can be leased again.
    s.insertLease(lease("l-2", "pd-1"));
    expect(s.activeLeases().map((l) => l.leaseId)).toEqual(["l-2"]);
  });
});
