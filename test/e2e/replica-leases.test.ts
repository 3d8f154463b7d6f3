/**
 * Leases across coordinator replicas: three `farm coordinator` processes on
 * one PostgreSQL database, lightweight agents (10 phones) attached to two of
 * them, lease calls spread over all three.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { WatchService } from "@farm/shared/gen/farm/v1/watch_service_pb";
import { bearer } from "../support/fake-agent.js";
import { waitFor, type FarmProcess } from "../support/farm-process.js";
import { startReplicaLeaseLab, type ReplicaLeaseLab } from "../support/replica-lease-lab.js";

const any = { serial: "", physicalId: "", labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "" };

let lab: ReplicaLeaseLab;
let database: ReplicaLeaseLab["database"];
let replicas: FarmProcess[];
let leases: Client<typeof LeaseService>[];
let admin: string;

beforeAll(async () => {
  lab = await startReplicaLeaseLab("replica-leases");
  ({ database, replicas, leases, admin } = lab);
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("leases across replicas", () => {
  it("grants 200 waiters spread over three replicas FIFO on 10 phones, never two leases on one phone; a Watch on one replica sees grants made on the others", async () => {
    // A Watch on replica 2 from the start.
    const watch = new AbortController();
    const seen = new Set<string>();
    const watching = (async () => {
      const client = createClient(WatchService, createGrpcTransport({ baseUrl: String(replicas[2]!.ready["url"]), interceptors: [bearer(admin)] }));
      for await (const ev of client.watch({}, { signal: watch.signal })) if (ev.kind.case === "lease") seen.add(ev.kind.value.leaseId);
    })().catch(() => undefined);

    // Every phone held, taken through all three replicas.
    const held: { token: string; lease?: { leaseId: string; physicalId: string } }[] = [];
    for (let i = 0; i < 10; i++) held.push(await leases[i % 3]!.acquireLease({ selector: any, waitMs: 0, ttlMs: 120_000 }));
    expect(new Set(held.map((h) => h.lease?.physicalId)).size).toBe(10);
    await waitFor("replica 2's Watch saw every grant", async () => (held.every((h) => seen.has(h.lease?.leaseId ?? "")) ? true : undefined));
    watch.abort();
    await watching;

    // 200 waiters, arriving through the replicas in turn.
    const granted = new Map<string, { leaseId: string; at: number }>();
    const waits: Promise<void>[] = [];
    for (let i = 0; i < 200; i++) {
      const ticket = `t-${String(i).padStart(3, "0")}`;
      const via = leases[i % 3]!;
      const served = via.acquireLease({ selector: any, waitMs: 90_000, ttlMs: 60_000, ticket }, { timeoutMs: 120_000 }).then(async (res) => {
        granted.set(ticket, { leaseId: res.lease?.leaseId ?? "", at: Date.now() });
        // Hold it a moment, then give it back through another replica.
        await new Promise((r) => setTimeout(r, 5));
        await leases[(i + 1) % 3]!.releaseLease({ token: res.token });
      });
      // Handled from the start (Promise.all below reports a failure): one that fails early is not "unhandled".
      served.catch(() => undefined);
      waits.push(served);
      // In batches of 20 concurrent callers.
      if (i % 20 === 19) await waitFor(`${i + 1} waiting`, async () => ((await leases[2]!.listLeases({})).queue.length === i + 1 ? true : undefined));
    }
    const queued = (await leases[1]!.listLeases({})).queue.map((w) => w.ticket);
    // Arrival order is the order the replicas stored the places in (concurrent callers race for it).
    expect(queued).toHaveLength(200);
    expect(new Set(queued).size).toBe(200);
    const stored = new pg.Client({ connectionString: database.url });
    await stored.connect();
    try {
      expect((await stored.query<{ ticket: string }>("SELECT ticket FROM lease_waiters ORDER BY seq")).rows.map((r) => r.ticket)).toEqual(queued);
    } finally {
      await stored.end();
    }

    for (const [i, h] of held.entries()) await leases[(i + 2) % 3]!.releaseLease({ token: h.token });
    await Promise.all(waits);
    expect(granted.size).toBe(200);

    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const rows = (await client.query<{ lease_id: string; physical_id: string; acquired_at: string; ended_at: string | null }>("SELECT lease_id, physical_id, acquired_at, ended_at FROM leases ORDER BY acquired_at, lease_id")).rows;
      expect(rows).toHaveLength(210);
      // Never two leases on one phone at once.
      const byPhone = new Map<string, { from: number; to: number }[]>();
      for (const r of rows) byPhone.set(r.physical_id, [...(byPhone.get(r.physical_id) ?? []), { from: Number(r.acquired_at), to: Number(r.ended_at) }]);
      for (const [phone, spans] of byPhone) for (let k = 1; k < spans.length; k++) expect(spans[k]!.from, phone).toBeGreaterThanOrEqual(spans[k - 1]!.to);
      // FIFO: grants in arrival order (a later waiter is never granted before an earlier one).
      const acquiredAt = new Map(rows.map((r) => [r.lease_id, Number(r.acquired_at)]));
      const order = queued.map((t) => acquiredAt.get(granted.get(t)!.leaseId)!);
      for (let k = 1; k < order.length; k++) expect(order[k], `waiter ${queued[k]}`).toBeGreaterThanOrEqual(order[k - 1]!);
    } finally {
      await client.end();
    }
  }, 180_000);

  it("tells a lease's end to its agent once, from the replica holding the agent, whichever replica ended it", async () => {
    const agent = lab.agents[0]!;
    const told = (leaseId: string) => agent.endedLeases.filter((id) => id === leaseId).length;
    const phone = { ...any, serial: "bench-0-0" };
    // The phone's agent is on replica 0: one lease taken and released through replica 2 (which holds no
    // agent), then one through replica 1 (which holds the other agent).
    const first = await leases[2]!.acquireLease({ selector: phone, waitMs: 30_000, ttlMs: 60_000 });
    await leases[2]!.releaseLease({ token: first.token });
    await waitFor("the first end told", async () => (told(first.lease!.leaseId) > 0 ? true : undefined));
    const second = await leases[1]!.acquireLease({ selector: phone, waitMs: 30_000, ttlMs: 60_000 });
    await leases[1]!.releaseLease({ token: second.token });
    await waitFor("the second end told", async () => (told(second.lease!.leaseId) > 0 ? true : undefined));
    // Every replica tells it as it learns it on main, the replica that ended it before the others: by
    // the second end, the first has been told more than once there.
    expect(told(first.lease!.leaseId)).toBe(1);
    expect(told(second.lease!.leaseId)).toBe(1);
  }, 60_000);
});
