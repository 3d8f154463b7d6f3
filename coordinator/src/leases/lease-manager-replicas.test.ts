/**
 * Two lease managers sharing one PostgreSQL database, as two coordinator
 * replicas do: each tells the other of its changes, as the replication bus
 * does. Revoking a holder on one replica ends what it holds through the other.
 */
import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { AgentHelloSchema, DeviceReportSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { createLogger } from "@farm/shared/log";
import type { FarmDatabase } from "../db/database.js";
import { openTestDatabase } from "../db/testing/test-database.js";
import { DeviceLabels } from "../devices/device-labels.js";
import { Registry } from "../registry/registry.js";
import { LeaseManager, type Grant } from "./lease-manager.js";
import { type LeaseRow } from "./lease-store.js";
import type { Selector } from "./selector.js";
import { createDeviceLabelStore, createLeaseStore, createRegistryStore } from "../db/stores.js";

const log = createLogger({ level: "error" });
let opened: FarmDatabase | undefined;
const managers: LeaseManager[] = [];

afterEach(async () => {
  for (const m of managers) m.abandonCalls(new Error("test over"));
  managers.length = 0;
  await opened?.close();
  opened = undefined;
});

const codeOf = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.code ?? "";
const onPd1: Selector = { serial: "", physicalId: "pd-1", labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "" };

/** A replica's registry, labels and lease manager on the shared database; `agent`: the lab host attaches to it. */
async function replica(db: FarmDatabase, agent: boolean, now: () => number = Date.now) {
  const registry = await Registry.open(createRegistryStore(db), { heartbeatMisses: 3 });
  const labels = await DeviceLabels.open(createDeviceLabelStore(db));
  const leases = await LeaseManager.open(createLeaseStore(db), registry, labels, log, now);
  registry.events.on("change", () => leases.kick(leases.dispatch()));
  managers.push(leases);
  if (agent) {
    await registry.attach(create(AgentHelloSchema, { agentId: "a-1", name: "lab-1", hostname: "h", agentVersion: "t", protocolVersion: 2, heartbeatIntervalMs: 1000 }), { terminate: () => undefined });
    await registry.replaceInventory("a-1", [create(DeviceReportSchema, { serial: "S-1", state: "device", properties: { physicalId: "pd-1", identityStatus: "ok", model: "Pixel 7", apiLevel: 34 } })]);
  }
  return leases;
}

/** Each tells the other of its changes, as the replication bus does. */
function pair(a: LeaseManager, b: LeaseManager): void {
  a.share({ replicaId: "r-1", isLive: () => true, publish: async () => b.kick(b.refresh()) });
  b.share({ replicaId: "r-2", isLive: () => true, publish: async () => a.kick(a.refresh()) });
}

function acquire(leases: LeaseManager, holder: string, ticket: string): Promise<Grant> {
  return leases.acquire(holder, onPd1, { waitMs: 60_000, ttlMs: 60_000, ticket, signal: new AbortController().signal });
}

describe("LeaseManager on PostgreSQL replicas", () => {
  it("a revoked holder loses the lease and the place it holds through another replica; the phone goes to the next waiter there", async () => {
    opened = await openTestDatabase("postgres");
    const r1 = await replica(opened, true);
    const r2 = await replica(opened, false);
    pair(r1, r2);
    const held = await acquire(r1, "alice", "t-a1");
    // alice waits for the phone again, then bob: both through replica 1.
    const queued = new Promise<void>((resolve) => r1.events.on("queue", (q) => q.length === 2 && resolve()));
    const aliceWaits = acquire(r1, "alice", "t-a2").then(() => "granted", codeOf);
    const bob = acquire(r1, "bob", "t-b");
    await queued;

    const ended = once(r1.events, "leaseEnded");
    // Revoked through replica 2, which took no part in any of it.
    const revoked = await r2.revokeHolder("alice");
    expect(revoked.leases.map((l) => l.leaseId)).toEqual([held.lease.leaseId]);
    expect(revoked.waiters.map((w) => w.ticket)).toEqual(["t-a2"]);
    // Replica 1 hears of it: the lease ends there (what hangs off it ends), her call fails, bob gets the phone.
    expect((await ended)[0]).toMatchObject({ leaseId: held.lease.leaseId, state: "released" });
    expect(await aliceWaits).toBe("LEASE_WAIT_CANCELLED");
    expect((await bob).lease).toMatchObject({ holder: "bob", physicalId: "pd-1" });
    const stored = await createLeaseStore(opened).leaseById(held.lease.leaseId);
    expect(stored).toMatchObject({ state: "released" });
    expect(await createLeaseStore(opened).waiters()).toEqual([]);
    // Her lease token is spent on both replicas.
    for (const r of [r1, r2]) {
      await expect(r.renew(held.token, 0)).rejects.toSatisfy((e) => codeOf(e) === "LEASE_RELEASED");
      await expect(r.release(held.token)).rejects.toSatisfy((e) => codeOf(e) === "LEASE_RELEASED");
    }
  });

  it("refuses another user's renewal and release through either replica; the holder's go through", async () => {
    opened = await openTestDatabase("postgres");
    const r1 = await replica(opened, true);
    const r2 = await replica(opened, false);
    pair(r1, r2);
    const held = await acquire(r1, "alice", "t-a1");
    const mallory = { tokenName: "mallory", admin: false };
    for (const r of [r1, r2]) {
      await expect(r.renew(held.token, 120_000, mallory)).rejects.toSatisfy((e) => codeOf(e) === "LEASE_HELD_BY_OTHER");
      await expect(r.release(held.token, mallory)).rejects.toSatisfy((e) => codeOf(e) === "LEASE_HELD_BY_OTHER");
    }
    expect(await createLeaseStore(opened).leaseById(held.lease.leaseId)).toMatchObject({ state: "active", ttlMs: 60_000 });
    expect((await r2.renew(held.token, 120_000, { tokenName: "alice", admin: false })).ttlMs).toBe(120_000);
    expect((await r2.release(held.token, { tokenName: "alice", admin: false })).state).toBe("released");
  });

  it("a lease released through replica B is refused on replica A in the next call, before any notice reaches A", async () => {
    opened = await openTestDatabase("postgres");
    const r1 = await replica(opened, true);
    const r2 = await replica(opened, false);
    // Nobody tells anybody: what A decides comes from the database alone.
    r1.share({ replicaId: "r-1", isLive: () => true, publish: async () => undefined });
    r2.share({ replicaId: "r-2", isLive: () => true, publish: async () => undefined });
    const held = await acquire(r1, "alice", "t-a1");
    expect((await r1.authorizeStored("pd-1", held.token)).leaseId).toBe(held.lease.leaseId);
    // Released through B, which never heard of the lease: the database decides.
    expect((await r2.release(held.token, { tokenName: "alice", admin: false })).state).toBe("released");
    // A's memory still has it (no notice came) ...
    expect(r1.leaseOf("pd-1")?.leaseId).toBe(held.lease.leaseId);
    // ... but a mutation's check on A reads the database: refused.
    await expect(r1.authorizeStored("pd-1", held.token)).rejects.toSatisfy((e) => codeOf(e) === "LEASE_REQUIRED");
    // Bob asks through A, whose memory still shows the phone taken: the database grants it all the same.
    const bob = await acquire(r1, "bob", "t-b1");
    expect(bob.lease.physicalId).toBe("pd-1");
    await expect(r1.authorizeStored("pd-1", held.token)).rejects.toSatisfy((e) => codeOf(e) === "LEASE_HELD_BY_OTHER");
    expect((await r1.authorizeStored("pd-1", bob.token)).leaseId).toBe(bob.lease.leaseId);
    expect(r1.leaseOf("pd-1")?.leaseId).toBe(bob.lease.leaseId);
  });

  it("holder checks on replica A follow a lease released and granted through B before any notice reaches A", async () => {
    opened = await openTestDatabase("postgres");
    const r1 = await replica(opened, true);
    const r2 = await replica(opened, true);
    r1.share({ replicaId: "r-1", isLive: () => true, publish: async () => undefined });
    r2.share({ replicaId: "r-2", isLive: () => true, publish: async () => undefined });
    const alice = { tokenName: "alice", admin: false };
    const bob = { tokenName: "bob", admin: false };
    const held = await acquire(r1, "alice", "t-a1");
    // Alice releases through B and Bob takes the phone through B; A heard of neither.
    await r2.release(held.token, alice);
    const bobs = await acquire(r2, "bob", "t-b1");
    expect(r1.leaseOf("pd-1")?.leaseId).toBe(held.lease.leaseId);
    // Bob's label change through A is his; Alice's is refused, as the database has it.
    expect((await r1.setLabels("S-1", { team: "b" }, { ...bob, leaseToken: bobs.token })).labels).toEqual({ team: "b" });
    await expect(r1.setLabels("S-1", { team: "a" }, { ...alice, leaseToken: held.token })).rejects.toSatisfy((e) => codeOf(e) === "LEASE_HELD_BY_OTHER");
    // Bob's read through A: memory refuses (it still shows Alice), the database allows.
    await r1.requireHolderToRead("pd-1", bob, bobs.token, "read it");
    await expect(r1.requireHolderToChange("pd-1", alice, held.token, "stop its recordings")).rejects.toSatisfy((e) => codeOf(e) === "LEASE_HELD_BY_OTHER");
    expect(await r1.isHolderStored("pd-1", "bob", null)).toBe(true);
    expect(await r1.isHolderStored("pd-1", "alice", held.token)).toBe(false);
    // A third user is refused a read by memory and by the database alike.
    await expect(r1.requireHolderToRead("pd-1", { tokenName: "carol", admin: false }, null, "read it")).rejects.toSatisfy((e) => codeOf(e) === "LEASE_HELD_BY_OTHER");
  });

  it("applies a lease notice's row without reading; a grant notice that arrives after its release is ignored", async () => {
    opened = await openTestDatabase("postgres");
    const r1 = await replica(opened, true);
    const r2 = await replica(opened, true);
    const sent: LeaseRow[] = [];
    r1.share({ replicaId: "r-1", isLive: () => true, publish: async (_kind, _id, row) => void (row && sent.push(row)) });
    r2.share({ replicaId: "r-2", isLive: () => true, publish: async () => undefined });
    const held = await acquire(r1, "alice", "t-a1");
    await r1.release(held.token);
    await waitUntil(() => sent.length === 2);
    expect(sent.map((r) => r.state)).toEqual(["active", "released"]);
    // Out of order: the release first, then the grant. B ends up without the lease.
    const ended: string[] = [];
    r2.events.on("leaseEnded", (l, origin) => ended.push(`${l.leaseId}:${origin}`));
    await r2.applyNotice(sent[1]!);
    await r2.applyNotice(sent[0]!);
    expect(r2.leaseOf("pd-1")).toBeUndefined();
    // In order, a new lease: B has it, then has it end, told it came from elsewhere.
    const again = await acquire(r1, "alice", "t-a2");
    await waitUntil(() => sent.length === 3);
    await r2.applyNotice(sent[2]!);
    expect(r2.leaseOf("pd-1")).toMatchObject({ leaseId: again.lease.leaseId, holder: "alice", state: "active" });
    await r1.release(again.token);
    await waitUntil(() => sent.length === 4);
    await r2.applyNotice(sent[3]!);
    expect(r2.leaseOf("pd-1")).toBeUndefined();
    expect(ended).toEqual([`${again.lease.leaseId}:elsewhere`]);
  });
});

describe("LeaseManager on PostgreSQL replicas: expiry", () => {
  it("expires by what is stored, in one statement: a lease renewed through B (no notice to A) is not expired by A; once due it is, once", async () => {
    opened = await openTestDatabase("postgres");
    let clock = Date.now();
    const now = () => clock;
    const r1 = await replica(opened, true, now);
    const r2 = await replica(opened, true, now);
    const toldByA: LeaseRow[] = [];
    r1.share({ replicaId: "r-1", isLive: () => true, publish: async (_k, _i, row) => void (row && toldByA.push(row)) });
    r2.share({ replicaId: "r-2", isLive: () => true, publish: async () => undefined });
    const held = await acquire(r1, "alice", "t-a1");
    // Renewed through B for 120 s; A's memory still says 60 s.
    await r2.renew(held.token, 120_000, { tokenName: "alice", admin: false });
    clock += 90_000;
    await r1.sweep();
    expect(await createLeaseStore(opened).leaseById(held.lease.leaseId)).toMatchObject({ state: "active" });
    await expect(r1.authorizeStored("pd-1", held.token)).resolves.toMatchObject({ leaseId: held.lease.leaseId });
    // Due by what is stored: A expires it, says so, and B's sweep finds nothing left to end.
    clock += 60_000;
    const ended = new Promise<[LeaseRow, string]>((resolve) => r1.events.once("leaseEnded", (l, origin) => resolve([l, origin])));
    await r1.sweep();
    expect(await ended).toEqual([expect.objectContaining({ leaseId: held.lease.leaseId, state: "expired" }), "here"]);
    await r2.sweep();
    expect(await createLeaseStore(opened).leaseById(held.lease.leaseId)).toMatchObject({ state: "expired", endedAt: clock });
    expect(toldByA.filter((r) => r.state === "expired").map((r) => r.leaseId)).toEqual([held.lease.leaseId]);
    await expect(r2.renew(held.token, 0)).rejects.toSatisfy((e) => codeOf(e) === "LEASE_EXPIRED");
  });
});

/** Notices are sent once committed, after the call returns: waits for them (on events, not a margin). */
async function waitUntil(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((r) => setImmediate(r));
}
