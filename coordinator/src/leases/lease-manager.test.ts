import { createHash } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { AgentHelloSchema, DeviceReportSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { createLogger } from "@farm/shared/log";
import { toErrorReport } from "@farm/shared/errors";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { leases as leaseRows, leaseWaiters } from "../db/schema.js";
import { DeviceLabels } from "../devices/device-labels.js";
import { Registry } from "../registry/registry.js";
import { SqliteRegistryStore } from "../registry/sqlite-registry-store.js";
import { LeaseManager, RESUME_GRACE_MS, type Grant } from "./lease-manager.js";
import type { Selector } from "./selector.js";
import { SqliteLeaseStore } from "./sqlite-lease-store.js";
import { sqliteDatabaseOf } from "../db/database.js";
import { createDeviceLabelStore } from "../db/stores.js";

// A fake clock: time moves only when a test says so, and sweeps run when a test calls them.
let now = 1_700_000_000_000;
const clock = () => now;
const log = createLogger({ level: "error" });

let opened: OpenedDatabase | undefined;
const managers: LeaseManager[] = [];

afterEach(() => {
  // End every call still waiting (clears its deadline timer) before the database goes.
  for (const m of managers) m.abandonCalls(new Error("test over"));
  managers.length = 0;
  opened?.close();
  opened = undefined;
});

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

function codeOf(err: unknown): string {
  return ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.code ?? "";
}

function sel(over: Partial<Selector> = {}): Selector {
  return { serial: "", physicalId: "", labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "", ...over };
}

const phones = [
  { serial: "S-1", physicalId: "pd-1", model: "Pixel 7" },
  { serial: "S-2", physicalId: "pd-2", model: "Pixel 8" },
];

/** A coordinator's registry, labels and lease manager on `db`, with one agent attached that reports `phones`. */
async function start(db: OpenedDatabase, attach = true) {
  const registry = await Registry.open(new SqliteRegistryStore(db.db), { heartbeatMisses: 3, now: clock });
  const labels = await DeviceLabels.open(createDeviceLabelStore(sqliteDatabaseOf(db.db)));
  const leases = await LeaseManager.open(new SqliteLeaseStore(db.db), registry, labels, log, clock);
  // Wired as the coordinator wires them: a device may have come free or started to match.
  registry.events.on("change", () => leases.kick(leases.dispatch()));
  labels.events.on("changed", () => leases.kick(leases.dispatch()));
  managers.push(leases);
  if (attach) await attachAgent(registry);
  return { registry, labels, leases };
}

async function attachAgent(registry: Registry): Promise<void> {
  await registry.attach(create(AgentHelloSchema, { agentId: "a-1", name: "lab-1", hostname: "h", agentVersion: "t", protocolVersion: 2, heartbeatIntervalMs: 1000 }), { terminate: () => undefined });
  await registry.replaceInventory(
    "a-1",
    phones.map((p) => create(DeviceReportSchema, { serial: p.serial, state: "device", properties: { physicalId: p.physicalId, identityStatus: "ok", model: p.model, apiLevel: 34 } })),
  );
}

/** An acquire call whose outcome the test can inspect synchronously. */
function call(leases: LeaseManager, holder: string, selector: Selector, opts: { ticket?: string; waitMs?: number; ttlMs?: number } = {}) {
  const controller = new AbortController();
  const c = {
    controller,
    ticket: opts.ticket ?? `t-${holder}`,
    grant: undefined as Grant | undefined,
    error: undefined as unknown,
    promise: undefined as unknown as Promise<Grant>,
  };
  c.promise = leases.acquire(holder, selector, { waitMs: opts.waitMs ?? 60_000, ttlMs: opts.ttlMs ?? 60_000, ticket: c.ticket, signal: controller.signal });
  c.promise.then(
    (g) => (c.grant = g),
    (e: unknown) => (c.error = e),
  );
  return c;
}

/** Lets settled promises run their handlers. */
const settle = () => new Promise<void>((r) => setImmediate(r));

function leaseRow(db: OpenedDatabase, leaseId: string) {
  return db.db.select().from(leaseRows).all().find((r) => r.leaseId === leaseId);
}

describe("LeaseManager: a lease by serial", () => {
  it("is refused as temporary (DEVICE_IDENTITY_PENDING) while the agent lists the serial without its identity, unless the caller waits: then it is granted once the identity is read", async () => {
    opened = openDatabase(":memory:");
    const { registry, leases } = await start(opened);
    // Plugged in: adb lists it, its properties are not read yet.
    await registry.upsertDevice("a-1", create(DeviceReportSchema, { serial: "S-3", state: "device" }));
    const now = call(leases, "ci", sel({ serial: "S-3" }), { waitMs: 0 });
    await expect(now.promise).rejects.toThrow(/has not read the phone's identity yet/);
    expect(codeOf(now.error)).toBe("DEVICE_IDENTITY_PENDING");
    // A serial nobody lists stays not found, waiting or not.
    const unknown = call(leases, "ci", sel({ serial: "S-9" }), { waitMs: 60_000 });
    await expect(unknown.promise).rejects.toThrow();
    expect(codeOf(unknown.error)).toBe("DEVICE_NOT_FOUND");

    const waiting = call(leases, "ci", sel({ serial: "S-3" }), { waitMs: 60_000 });
    await settle();
    expect(waiting.error).toBeUndefined();
    expect(waiting.grant).toBeUndefined();
    await registry.upsertDevice("a-1", create(DeviceReportSchema, { serial: "S-3", state: "device", properties: { physicalId: "pd-3", identityStatus: "ok", model: "Pixel 9", apiLevel: 35 } }));
    const grant = await waiting.promise;
    expect(grant.lease.physicalId).toBe("pd-3");
    expect(grant.lease.serial).toBe("S-3");
  });
});

describe("LeaseManager: FIFO", () => {
  it("grants a freed device to the oldest waiter it matches, skipping older waiters it does not", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    const h1 = call(leases, "h1", sel({ physicalId: "pd-1" }));
    const h2 = call(leases, "h2", sel({ physicalId: "pd-2" }));
    await settle();
    expect(h1.grant?.lease.physicalId).toBe("pd-1");
    expect(h2.grant?.lease.physicalId).toBe("pd-2");

    now += 1;
    const wantsPixel8 = call(leases, "w1", sel({ model: "Pixel 8" }));
    const any1 = call(leases, "w2", sel());
    const any2 = call(leases, "w3", sel());
    const wantsPixel7 = call(leases, "w4", sel({ model: "Pixel 7" }));
    await settle();
    expect(leases.list().queue.map((w) => w.holder)).toEqual(["w1", "w2", "w3", "w4"]);

    // pd-1 (a Pixel 7) frees: w1 does not match it, w2 is the oldest that does.
    await leases.release(h1.grant!.token);
    await settle();
    expect(any1.grant?.lease.physicalId).toBe("pd-1");
    expect([wantsPixel8, any2, wantsPixel7].map((c) => c.grant)).toEqual([undefined, undefined, undefined]);

    // pd-2 (a Pixel 8) frees: w1 has waited longest and matches.
    await leases.release(h2.grant!.token);
    await settle();
    expect(wantsPixel8.grant?.lease.physicalId).toBe("pd-2");
    expect(any2.grant).toBeUndefined();

    // pd-1 again: w3 arrived before w4, both match.
    await leases.release(any1.grant!.token);
    await settle();
    expect(any2.grant?.lease.physicalId).toBe("pd-1");
    expect(wantsPixel7.grant).toBeUndefined();
    expect(leases.list().queue.map((w) => w.holder)).toEqual(["w4"]);
    expect(opened.db.select().from(leaseWaiters).all().map((w) => w.holder)).toEqual(["w4"]);
  });
});

describe("LeaseManager: a waiter whose call ended", () => {
  it("is removed from the queue and the database, and the device goes to the next waiter", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    const h1 = call(leases, "h1", sel({ physicalId: "pd-1" }));
    await settle();
    const gone = call(leases, "gone", sel({ physicalId: "pd-1" }));
    const next = call(leases, "next", sel({ physicalId: "pd-1" }));
    await settle();
    gone.controller.abort();
    await settle();
    expect(codeOf(gone.error)).toBe("LEASE_WAIT_CANCELLED");
    expect(opened.db.select().from(leaseWaiters).all().map((w) => w.holder)).toEqual(["next"]);

    await leases.release(h1.grant!.token);
    await settle();
    expect(next.grant?.lease.holder).toBe("next");
    expect(gone.grant).toBeUndefined();
    expect(opened.db.select().from(leaseRows).all().filter((r) => r.holder === "gone")).toEqual([]);
  });

  it("is never handed a device that frees while its call is ending", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    const h1 = call(leases, "h1", sel({ physicalId: "pd-1" }));
    await settle();
    // The device frees inside the abort, before the lease manager's own abort listener runs.
    const controller = new AbortController();
    controller.signal.addEventListener("abort", () => leases.kick(leases.release(h1.grant!.token)));
    const gone = { grant: undefined as Grant | undefined, error: undefined as unknown };
    leases.acquire("gone", sel({ physicalId: "pd-1" }), { waitMs: 60_000, ttlMs: 60_000, ticket: "t-gone", signal: controller.signal }).then(
      (g) => (gone.grant = g),
      (e: unknown) => (gone.error = e),
    );
    const next = call(leases, "next", sel({ physicalId: "pd-1" }));
    await settle();
    controller.abort();
    await settle();
    expect(gone.grant).toBeUndefined();
    expect(codeOf(gone.error)).toBe("LEASE_WAIT_CANCELLED");
    expect(next.grant?.lease.holder).toBe("next");
    expect(leases.leaseOf("pd-1")?.holder).toBe("next");
    // Whatever was committed for the departed caller is not active.
    expect(opened.db.select().from(leaseRows).all().filter((r) => r.holder === "gone" && r.state === "active")).toEqual([]);
    // Nothing was: a caller that is gone is skipped before anything is committed.
    expect(opened.db.select().from(leaseRows).all().filter((r) => r.holder === "gone")).toEqual([]);
  });

  it("is never granted when its signal is already aborted", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    const controller = new AbortController();
    controller.abort();
    await expect(leases.acquire("gone", sel(), { waitMs: 60_000, ttlMs: 60_000, ticket: "", signal: controller.signal })).rejects.toSatisfy((e) => codeOf(e) === "LEASE_WAIT_CANCELLED");
    expect(leases.list()).toEqual({ leases: [], queue: [] });
    expect(opened.db.select().from(leaseRows).all()).toEqual([]);
  });
});

describe("LeaseManager: a grant is committed before it is returned", () => {
  it("has the lease row active and the waiter row gone when the caller receives it", async () => {
    opened = openDatabase(":memory:");
    const db = opened;
    const { leases } = await start(db);
    const h1 = call(leases, "h1", sel({ physicalId: "pd-1" }));
    await settle();
    const seen: unknown[] = [];
    const waiting = call(leases, "w", sel({ physicalId: "pd-1" }), { ticket: "t-w" });
    // Read the database in the very first callback the grant reaches.
    void waiting.promise.then((g) => {
      seen.push(leaseRow(db, g.lease.leaseId), db.db.select().from(leaseWaiters).all());
    });
    await settle();
    await leases.release(h1.grant!.token);
    await settle();
    const grant = waiting.grant!;
    expect(seen).toEqual([expect.objectContaining({ state: "active", holder: "w", physicalId: "pd-1", tokenHash: sha256(grant.token) }), []]);
  });

  it("has the lease row active when a grant made at once (nobody queued) reaches the caller", async () => {
    opened = openDatabase(":memory:");
    const db = opened;
    const { leases } = await start(db);
    const seen: unknown[] = [];
    const c = call(leases, "h1", sel({ physicalId: "pd-2" }));
    void c.promise.then((g) => seen.push(leaseRow(db, g.lease.leaseId)));
    await settle();
    expect(seen).toEqual([expect.objectContaining({ state: "active", holder: "h1", physicalId: "pd-2", tokenHash: sha256(c.grant!.token) })]);
    expect(leases.list().queue).toEqual([]);
  });

  it("returns nothing, and keeps the waiter queued, when the commit fails", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    // The database refuses every new lease.
    opened.sqlite.exec("CREATE TRIGGER refuse_leases BEFORE INSERT ON leases BEGIN SELECT RAISE(ABORT, 'refused by test'); END");
    const immediate = call(leases, "now", sel({ physicalId: "pd-1" }));
    await settle();
    expect(immediate.grant).toBeUndefined();
    expect(String(immediate.error)).toMatch(/refused by test/);
    expect(leases.leaseOf("pd-1")).toBeUndefined();

    opened.sqlite.exec("DROP TRIGGER refuse_leases");
    const h1 = call(leases, "h1", sel({ physicalId: "pd-1" }));
    await settle();
    const waiting = call(leases, "w", sel({ physicalId: "pd-1" }));
    await settle();
    opened.sqlite.exec("CREATE TRIGGER refuse_leases BEFORE INSERT ON leases BEGIN SELECT RAISE(ABORT, 'refused by test'); END");
    // The release stands; the grant that follows fails (logged), and nothing is handed out.
    await leases.release(h1.grant!.token);
    await settle();
    expect(waiting.grant).toBeUndefined();
    expect(waiting.error).toBeUndefined();
    expect(leases.leaseOf("pd-1")).toBeUndefined();
    expect(leases.list().queue.map((w) => w.holder)).toEqual(["w"]);
    expect(opened.db.select().from(leaseWaiters).all().map((w) => w.holder)).toEqual(["w"]);

    opened.sqlite.exec("DROP TRIGGER refuse_leases");
    await leases.dispatch();
    await settle();
    expect(waiting.grant?.lease.physicalId).toBe("pd-1");
    expect(leaseRow(opened, waiting.grant!.lease.leaseId)?.state).toBe("active");
  });
});

describe("LeaseManager: expiry", () => {
  it("expires an unrenewed lease at its time and grants the device to the next waiter", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    const h1 = call(leases, "h1", sel({ physicalId: "pd-1" }), { ttlMs: 5_000 });
    await settle();
    const next = call(leases, "next", sel({ physicalId: "pd-1" }));
    await settle();

    now += 4_999;
    await leases.sweep();
    await settle();
    expect(next.grant).toBeUndefined();
    expect(leases.leaseOf("pd-1")?.holder).toBe("h1");

    now += 1;
    await leases.sweep();
    await settle();
    expect(leaseRow(opened, h1.grant!.lease.leaseId)).toMatchObject({ state: "expired", endedAt: now });
    expect(next.grant?.lease).toMatchObject({ holder: "next", physicalId: "pd-1", acquiredAt: now, expiresAt: now + 60_000 });
    await expect(leases.renew(h1.grant!.token, 0)).rejects.toSatisfy((e) => codeOf(e) === "LEASE_EXPIRED");
    expect(() => leases.authorize("pd-1", h1.grant!.token)).toThrow(expect.toSatisfy((e) => codeOf(e) === "LEASE_HELD_BY_OTHER"));
  });

  it("counts the time to live from the last renewal", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    const h1 = call(leases, "h1", sel({ physicalId: "pd-1" }), { ttlMs: 5_000 });
    await settle();
    now += 4_000;
    await leases.renew(h1.grant!.token, 0);
    now += 4_000;
    await leases.sweep();
    expect(leases.leaseOf("pd-1")?.holder).toBe("h1");
    now += 1_000;
    await leases.sweep();
    expect(leases.leaseOf("pd-1")).toBeUndefined();
  });

  it("ends a wait at its deadline with LEASE_WAIT_TIMEOUT", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    call(leases, "h1", sel({ physicalId: "pd-1" }));
    await settle();
    const w = call(leases, "w", sel({ physicalId: "pd-1" }), { waitMs: 10_000 });
    await settle();
    now += 10_000;
    await leases.sweep();
    await settle();
    expect(codeOf(w.error)).toBe("LEASE_WAIT_TIMEOUT");
    expect(opened.db.select().from(leaseWaiters).all()).toEqual([]);
  });
});

describe("LeaseManager: across a restart", () => {
  /** Two waiters queued behind h1 on pd-1, then the coordinator "restarts": a new registry and lease manager on the same database. */
  async function restartWithQueue() {
    const db = opened as OpenedDatabase;
    const before = await start(db);
    const h1 = call(before.leases, "h1", sel({ physicalId: "pd-1" }), { ttlMs: 600_000 });
    await settle();
    call(before.leases, "alice", sel({ physicalId: "pd-1" }), { ticket: "t-alice", waitMs: 600_000 });
    now += 1;
    call(before.leases, "bob", sel({ model: "Pixel 7" }), { ticket: "t-bob", waitMs: 600_000 });
    await settle();
    const queuedBefore = before.leases.list().queue.map((w) => ({ ticket: w.ticket, seq: w.seq, holder: w.holder, selector: w.selector }));
    // The old process is gone: its calls end without touching the database.
    before.leases.abandonCalls(new Error("process exited"));
    now += 1_000;
    const after = await start(db, false);
    return { h1, queuedBefore, after };
  }

  it("restores the queue in order, with the active lease, and keeps each place for its returning client", async () => {
    opened = openDatabase(":memory:");
    const { h1, queuedBefore, after } = await restartWithQueue();
    const { leases, registry } = after;
    expect(leases.list().queue.map((w) => ({ ticket: w.ticket, seq: w.seq, holder: w.holder, selector: w.selector }))).toEqual(queuedBefore);
    expect(leases.authorize("pd-1", h1.grant!.token).holder).toBe("h1");

    await attachAgent(registry);
    // Both clients come back, bob first; alice keeps the place she had before the restart.
    const bob = call(leases, "bob", sel(), { ticket: "t-bob" });
    const alice = call(leases, "alice", sel(), { ticket: "t-alice" });
    const carol = call(leases, "carol", sel({ physicalId: "pd-1" }));
    await settle();
    expect(leases.list().queue.map((w) => w.holder)).toEqual(["alice", "bob", "carol"]);
    const seqs = leases.list().queue.map((w) => w.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));

    await leases.release(h1.grant!.token);
    await settle();
    expect(alice.grant?.lease.physicalId).toBe("pd-1");
    await leases.release(alice.grant!.token);
    await settle();
    // bob's restored selector (model Pixel 7) is the one that counts, not the one sent on return.
    expect(bob.grant?.lease.physicalId).toBe("pd-1");
    expect(carol.grant).toBeUndefined();
  });

  it("lets a returned client be served before an older waiter whose client has not come back, and drops that one after the grace period", async () => {
    opened = openDatabase(":memory:");
    const { h1, after } = await restartWithQueue();
    const { leases, registry } = after;
    await attachAgent(registry);
    const bob = call(leases, "bob", sel(), { ticket: "t-bob" });
    await settle();
    await leases.release(h1.grant!.token);
    await settle();
    expect(bob.grant?.lease.physicalId).toBe("pd-1");
    expect(leases.list().queue.map((w) => w.holder)).toEqual(["alice"]);

    now += RESUME_GRACE_MS - 1;
    await leases.sweep();
    expect(leases.list().queue.map((w) => w.holder)).toEqual(["alice"]);
    now += 1;
    await leases.sweep();
    expect(leases.list().queue).toEqual([]);
    expect(opened.db.select().from(leaseWaiters).all()).toEqual([]);
  });

  it("refuses another caller's ticket", async () => {
    opened = openDatabase(":memory:");
    const { after } = await restartWithQueue();
    const mallory = call(after.leases, "mallory", sel(), { ticket: "t-alice" });
    await settle();
    expect(codeOf(mallory.error)).toBe("PERMISSION_DENIED");
    expect(after.leases.list().queue.map((w) => w.holder)).toEqual(["alice", "bob"]);
  });
});

describe("LeaseManager: what lets a waiter through", () => {
  it("grants a device whose agent attaches while the request waits", async () => {
    opened = openDatabase(":memory:");
    const { leases, registry } = await start(opened, false);
    const w = call(leases, "w", sel({ model: "Pixel 8" }));
    await settle();
    expect(w.grant).toBeUndefined();
    await attachAgent(registry);
    await settle();
    expect(w.grant?.lease).toMatchObject({ holder: "w", physicalId: "pd-2", serial: "S-2", agentId: "a-1" });
  });

  it("grants a device once it gets the labels the request asks for", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    // The one phone that carries the label is held, so the request waits rather than being refused.
    await leases.setLabels("S-1", { rack: "b2" });
    const holder = call(leases, "h", sel({ physicalId: "pd-1" }));
    await settle();
    expect(holder.grant?.lease.physicalId).toBe("pd-1");
    const w = call(leases, "w", sel({ labels: { rack: "b2" } }));
    await settle();
    expect(w.grant).toBeUndefined();
    await leases.setLabels("S-2", { rack: "b1" });
    await settle();
    expect(w.grant).toBeUndefined();
    await leases.setLabels("S-2", { rack: "b2" });
    await settle();
    expect(w.grant?.lease.physicalId).toBe("pd-2");
  });

  it("refuses at once a selector no phone the farm knows can match, and takes a short physical id", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    const none = call(leases, "w", sel({ labels: { rack: "b2" } }));
    await settle();
    expect(toErrorReport(none.error)).toMatchObject({ code: "NO_DEVICE_MATCHES", field: "label" });
    expect(leases.list().queue).toHaveLength(0);
    const short = call(leases, "s", sel({ physicalId: "pd-2…" }));
    await settle();
    expect(short.grant?.lease.physicalId).toBe("pd-2");
    const ambiguous = call(leases, "a", sel({ physicalId: "pd-" }));
    await settle();
    expect(toErrorReport(ambiguous.error)).toMatchObject({ code: "DEVICE_AMBIGUOUS", field: "physical-id" });
  });

  it("lets only the holder (or an admin) change a leased phone's labels", async () => {
    opened = openDatabase(":memory:");
    const { leases, labels } = await start(opened);
    const h = call(leases, "h1", sel({ physicalId: "pd-1" }));
    await settle();
    const other = { tokenName: "mallory", admin: false, leaseToken: null };
    await expect(leases.setLabels("S-1", { rack: "x" }, other)).rejects.toSatisfy((e) => codeOf(e) === "LEASE_HELD_BY_OTHER");
    expect(labels.of("pd-1")).toEqual({});
    expect(await leases.setLabels("S-1", { rack: "a1" }, { tokenName: "someone", admin: false, leaseToken: h.grant!.token })).toEqual({ physicalId: "pd-1", labels: { rack: "a1" } });
    expect(await leases.removeLabel("S-1", "rack", { tokenName: "root", admin: true, leaseToken: null })).toEqual({ physicalId: "pd-1", labels: {} });
  });
});

describe("LeaseManager: a ticket used by a second call", () => {
  it("moves the place to the newer call, which a late abort of the older one does not lose", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    const h1 = call(leases, "h1", sel({ physicalId: "pd-1" }));
    await settle();
    const first = call(leases, "w", sel({ physicalId: "pd-1" }), { ticket: "t-w" });
    const behind = call(leases, "behind", sel({ physicalId: "pd-1" }));
    await settle();
    const second = call(leases, "w", sel({ physicalId: "pd-1" }), { ticket: "t-w" });
    await settle();
    expect(codeOf(first.error)).toBe("LEASE_WAIT_CANCELLED");
    first.controller.abort();
    expect(leases.list().queue.map((w) => w.holder)).toEqual(["w", "behind"]);
    await leases.release(h1.grant!.token);
    await settle();
    expect(second.grant?.lease.holder).toBe("w");
    expect(behind.grant).toBeUndefined();
  });
});

describe("LeaseManager: events", () => {
  it("tells every subscriber about grants, the queue and ended leases, in that order", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    const a: string[] = [];
    const b: string[] = [];
    for (const log of [a, b]) {
      leases.events.on("lease", (l) => log.push(`lease ${l.holder} ${l.state}`));
      leases.events.on("leaseEnded", (l) => log.push(`ended ${l.holder} ${l.state}`));
      leases.events.on("queue", (q) => log.push(`queue ${q.map((w) => w.holder).join(",")}`));
    }
    const h1 = call(leases, "h1", sel({ physicalId: "pd-1" }));
    await settle();
    call(leases, "w", sel({ physicalId: "pd-1" }));
    await settle();
    await leases.release(h1.grant!.token);
    await settle();
    const expected = ["lease h1 active", "queue w", "ended h1 released", "lease w active", "queue "];
    expect(a).toEqual(expected);
    expect(b).toEqual(expected);
  });
});

describe("LeaseManager: a revoked holder holds nothing", () => {
  it("ends every lease of the holder (the phone goes to the next waiter), drops its places in the queue and fails their calls", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    const ended: string[] = [];
    leases.events.on("leaseEnded", (l) => ended.push(`${l.holder} ${l.physicalId} ${l.state}`));
    const a1 = call(leases, "alice", sel({ physicalId: "pd-1" }), { ticket: "t-a1" });
    const a2 = call(leases, "alice", sel({ physicalId: "pd-2" }), { ticket: "t-a2" });
    await settle();
    // alice queues once more (behind nobody), then bob waits for pd-1.
    const aliceWaits = call(leases, "alice", sel({ physicalId: "pd-1" }), { ticket: "t-a3" });
    const bob = call(leases, "bob", sel({ physicalId: "pd-1" }));
    await settle();
    expect(leases.list().queue.map((w) => w.holder)).toEqual(["alice", "bob"]);

    const revoked = await leases.revokeHolder("alice");
    await settle();
    expect(revoked.leases.map((l) => l.physicalId).sort()).toEqual(["pd-1", "pd-2"]);
    expect(revoked.waiters.map((w) => w.ticket)).toEqual(["t-a3"]);
    expect(ended.sort()).toEqual(["alice pd-1 released", "alice pd-2 released"]);
    for (const g of [a1.grant!, a2.grant!]) expect(leaseRow(opened, g.lease.leaseId)).toMatchObject({ state: "released" });
    // Her waiting call ends, and her place is gone from the database; the freed phone goes to bob.
    expect(codeOf(aliceWaits.error)).toBe("LEASE_WAIT_CANCELLED");
    expect(opened.db.select().from(leaseWaiters).all()).toEqual([]);
    expect(bob.grant?.lease.physicalId).toBe("pd-1");
    expect(leases.leaseOf("pd-2")).toBeUndefined();

    // Her lease tokens are spent: no renewal, release or use.
    const token = a2.grant!.token;
    await expect(leases.renew(token, 0)).rejects.toSatisfy((e) => codeOf(e) === "LEASE_RELEASED");
    await expect(leases.release(token)).rejects.toSatisfy((e) => codeOf(e) === "LEASE_RELEASED");
    expect(() => leases.authorize("pd-2", token)).toThrow(/needs a lease/);
    expect(leases.leaseOfToken(token)).toBeUndefined();
  });

  it("drops a place restored from before a restart that its client has not come back for", async () => {
    opened = openDatabase(":memory:");
    const first = await start(opened);
    const h = call(first.leases, "h1", sel({ physicalId: "pd-1" }));
    await settle();
    call(first.leases, "alice", sel({ physicalId: "pd-1" }), { ticket: "t-alice" });
    await settle();
    first.leases.abandonCalls(new Error("restart"));
    const { leases } = await start(opened, false);
    expect(leases.list().queue.map((w) => w.ticket)).toEqual(["t-alice"]);
    const revoked = await leases.revokeHolder("alice");
    expect(revoked).toMatchObject({ leases: [], waiters: [{ ticket: "t-alice" }] });
    expect(leases.list().queue).toEqual([]);
    expect(opened.db.select().from(leaseWaiters).all()).toEqual([]);
    // Someone else's lease stands.
    expect(leases.leaseOf("pd-1")?.leaseId).toBe(h.grant!.lease.leaseId);
  });
});

describe("LeaseManager: renewing and releasing are the holder's", () => {
  it("refuses another user presenting the holder's lease token with LEASE_HELD_BY_OTHER naming the holder; the holder and an admin may", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    const h = call(leases, "alice", sel({ physicalId: "pd-1" }), { ttlMs: 60_000 });
    await settle();
    const token = h.grant!.token;
    const before = leases.leaseOf("pd-1")!.expiresAt;
    now += 1_000;
    const mallory = { tokenName: "mallory", admin: false };
    for (const attempt of [leases.renew(token, 120_000, mallory), leases.release(token, mallory)]) {
      const err = await attempt.then(() => undefined, (e: unknown) => ConnectError.from(e));
      const detail = err?.findDetails(ErrorDetailSchema)[0];
      expect(detail).toMatchObject({ code: "LEASE_HELD_BY_OTHER", field: "lease" });
      expect(err?.rawMessage).toMatch(/alice/);
    }
    expect(leaseRow(opened, h.grant!.lease.leaseId)).toMatchObject({ state: "active", expiresAt: before });
    expect(leases.leaseOf("pd-1")?.expiresAt).toBe(before);

    // The holder, with any of her processes (same user token), renews; an admin may renew and release.
    expect((await leases.renew(token, 120_000, { tokenName: "alice", admin: false })).expiresAt).toBe(now + 120_000);
    expect((await leases.renew(token, 0, { tokenName: "root", admin: true })).ttlMs).toBe(120_000);
    expect((await leases.release(token, { tokenName: "root", admin: true })).state).toBe("released");
    expect(leaseRow(opened, h.grant!.lease.leaseId)).toMatchObject({ state: "released" });
  });

  it("lets the holder release with her own token", async () => {
    opened = openDatabase(":memory:");
    const { leases } = await start(opened);
    const h = call(leases, "alice", sel({ physicalId: "pd-1" }));
    await settle();
    expect((await leases.release(h.grant!.token, { tokenName: "alice", admin: false })).state).toBe("released");
    expect(leases.leaseOf("pd-1")).toBeUndefined();
  });
});
