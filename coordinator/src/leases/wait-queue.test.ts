import { describe, expect, it } from "vitest";
import type { Waiter, WaiterStore } from "./lease-store.js";
import { RESUME_GRACE_MS, WaitQueue, type PendingCall } from "./wait-queue.js";

const t0 = 1_700_000_000_000;

/** The stored rows, in a map; `refuse` makes the next write fail. */
function memoryStore(rows: Waiter[] = []): WaiterStore & { rows: Map<string, Waiter>; refuse: boolean } {
  const store = {
    rows: new Map(rows.map((w) => [w.ticket, w])),
    refuse: false,
    waiters: async () => [...store.rows.values()].sort((a, b) => a.seq - b.seq),
    async insertWaiter(w: Waiter) {
      if (store.refuse) throw new Error("refused by test");
      store.rows.set(w.ticket, w);
    },
    async setWaiterCaller(ticket: string, replicaId: string | null, tokenHash: string | null) {
      const w = store.rows.get(ticket);
      if (w) store.rows.set(ticket, { ...w, replicaId, tokenHash });
    },
    async deleteWaiter(ticket: string) {
      if (store.refuse) throw new Error("refused by test");
      store.rows.delete(ticket);
    },
  };
  return store;
}

const any = { serial: "", physicalId: "", labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "" };
const waiter = (ticket: string, seq: number, waitDeadline = t0 + 600_000): Waiter => ({ ticket, seq, holder: ticket, selector: any, enqueuedAt: t0, waitDeadline, ttlMs: 60_000, replicaId: null, tokenHash: null });
const pending = (): PendingCall & { failed: Error[] } => {
  const failed: Error[] = [];
  return { failed, token: "farml_test", gone: () => false, deliver: () => true, fail: (e) => failed.push(e) };
};

describe("WaitQueue", async () => {
  it("restores stored waiters in arrival order, numbering new ones after them", async () => {
    const store = memoryStore([waiter("b", 7), waiter("a", 3)]);
    const q = await WaitQueue.open(store, t0);
    expect(q.list().map((w) => w.ticket)).toEqual(["a", "b"]);
    const c = await q.enqueue({ ticket: "c", holder: "c", selector: any, enqueuedAt: t0, waitDeadline: t0 + 1_000, ttlMs: 1_000, replicaId: null, tokenHash: null });
    expect(c.seq).toBe(8);
    expect((await store.waiters()).map((w) => w.ticket)).toEqual(["a", "b", "c"]);
  });

  it("keeps a restored waiter for its client until the grace period (or its own deadline) ends", async () => {
    const q = await WaitQueue.open(memoryStore([waiter("a", 1), waiter("soon", 2, t0 + 5_000), waiter("back", 3)]), t0);
    expect(q.callOf("a")).toBeUndefined();
    q.attach("back", pending());
    expect(q.due(t0 + 4_999)).toEqual([]);
    expect(q.due(t0 + 5_000).map((w) => w.ticket)).toEqual(["soon"]);
    expect(q.due(t0 + RESUME_GRACE_MS).map((w) => w.ticket)).toEqual(["a", "soon"]);
  });

  it("changes nothing in memory when the store refuses a write", async () => {
    const store = memoryStore([waiter("a", 1)]);
    const q = await WaitQueue.open(store, t0);
    store.refuse = true;
    await expect(q.enqueue({ ticket: "b", holder: "b", selector: any, enqueuedAt: t0, waitDeadline: t0, ttlMs: 1_000, replicaId: null, tokenHash: null })).rejects.toThrow(/refused/);
    await expect(q.remove(q.find("a")!)).rejects.toThrow(/refused/);
    expect(q.list().map((w) => w.ticket)).toEqual(["a"]);
    store.refuse = false;
    expect((await q.enqueue({ ticket: "b", holder: "b", selector: any, enqueuedAt: t0, waitDeadline: t0, ttlMs: 1_000, replicaId: null, tokenHash: null })).seq).toBe(2);
  });

  it("keeps the calls apart from the rows: detaching an older call leaves the newer one, abandoning keeps the rows", async () => {
    const store = memoryStore();
    const q = await WaitQueue.open(store, t0);
    await q.enqueue({ ticket: "a", holder: "a", selector: any, enqueuedAt: t0, waitDeadline: t0 + 1_000, ttlMs: 1_000, replicaId: null, tokenHash: null });
    const older = pending();
    const newer = pending();
    expect(q.attach("a", older)).toBeUndefined();
    expect(q.attach("a", newer)).toBe(older);
    q.detach("a", older);
    expect(q.callOf("a")).toBe(newer);
    q.abandon(new Error("stopping"));
    expect(newer.failed.map((e) => e.message)).toEqual(["stopping"]);
    expect(q.callOf("a")).toBeUndefined();
    expect((await store.waiters()).map((w) => w.ticket)).toEqual(["a"]);
  });
});
