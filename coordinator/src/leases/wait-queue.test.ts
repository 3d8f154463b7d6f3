import { describe, expect, it } from "vitest";
import type { Waiter, WaiterStore } from "./lease-store.js";
import { RESUME_GRACE_MS, WaitQueue, type PendingCall } from "./wait-queue.js";

const t0 = 1_700_000_000_000;

/** The stored rows, in a map; `refuse` makes the next write fail. */
function memoryStore(rows: Waiter[] = []): WaiterStore & { rows: Map<string, Waiter>; refuse: boolean } {
  const store = {
    rows: new Map(rows.map((w) => [w.ticket, w])),
    refuse: false,
    waiters: () => [...store.rows.values()].sort((a, b) => a.seq - b.seq),
    insertWaiter(w: Waiter) {
      if (store.refuse) throw new Error("refused by test");
      store.rows.set(w.ticket, w);
    },
    deleteWaiter(ticket: string) {
      if (store.refuse) throw new Error("refused by test");
      store.rows.delete(ticket);
    },
  };
  return store;
}

const any = { serial: "", physicalId: "", labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "" };
const waiter = (ticket: string, seq: number, waitDeadline = t0 + 600_000): Waiter => ({ ticket, seq, holder: ticket, selector: any, enqueuedAt: t0, waitDeadline, ttlMs: 60_000 });
const pending = (): PendingCall & { failed: Error[] } => {
  const failed: Error[] = [];
  return { failed, gone: () => false, deliver: () => true, fail: (e) => failed.push(e) };
};

describe("WaitQueue", () => {
  it("restores stored waiters in arrival order, numbering new ones after them", () => {
    const store = memoryStore([waiter("b", 7), waiter("a", 3)]);
    const q = new WaitQueue(store, t0);
    expect(q.list().map((w) => w.ticket)).toEqual(["a", "b"]);
    const c = q.enqueue({ ticket: "c", holder: "c", selector: any, enqueuedAt: t0, waitDeadline: t0 + 1_000, ttlMs: 1_000 });
    expect(c.seq).toBe(8);
    expect(store.waiters().map((w) => w.ticket)).toEqual(["a", "b", "c"]);
  });

  it("keeps a restored waiter for its client until the grace period (or its own deadline) ends", () => {
    const q = new WaitQueue(memoryStore([waiter("a", 1), waiter("soon", 2, t0 + 5_000), waiter("back", 3)]), t0);
    expect(q.callOf("a")).toBeUndefined();
    q.attach("back", pending());
    expect(q.due(t0 + 4_999)).toEqual([]);
    expect(q.due(t0 + 5_000).map((w) => w.ticket)).toEqual(["soon"]);
    expect(q.due(t0 + RESUME_GRACE_MS).map((w) => w.ticket)).toEqual(["a", "soon"]);
  });

  it("changes nothing in memory when the store refuses a write", () => {
    const store = memoryStore([waiter("a", 1)]);
    const q = new WaitQueue(store, t0);
    store.refuse = true;
    expect(() => q.enqueue({ ticket: "b", holder: "b", selector: any, enqueuedAt: t0, waitDeadline: t0, ttlMs: 1_000 })).toThrow(/refused/);
    expect(() => q.remove(q.find("a")!)).toThrow(/refused/);
    expect(q.list().map((w) => w.ticket)).toEqual(["a"]);
    store.refuse = false;
    expect(q.enqueue({ ticket: "b", holder: "b", selector: any, enqueuedAt: t0, waitDeadline: t0, ttlMs: 1_000 }).seq).toBe(2);
  });

  it("keeps the calls apart from the rows: detaching an older call leaves the newer one, abandoning keeps the rows", () => {
    const store = memoryStore();
    const q = new WaitQueue(store, t0);
    q.enqueue({ ticket: "a", holder: "a", selector: any, enqueuedAt: t0, waitDeadline: t0 + 1_000, ttlMs: 1_000 });
    const older = pending();
    const newer = pending();
    expect(q.attach("a", older)).toBeUndefined();
    expect(q.attach("a", newer)).toBe(older);
    q.detach("a", older);
    expect(q.callOf("a")).toBe(newer);
    q.abandon(new Error("stopping"));
    expect(newer.failed.map((e) => e.message)).toEqual(["stopping"]);
    expect(q.callOf("a")).toBeUndefined();
    expect(store.waiters().map((w) => w.ticket)).toEqual(["a"]);
  });
});
