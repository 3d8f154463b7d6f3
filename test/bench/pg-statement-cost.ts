/**
 * What the pg client and the change notices cost a replica per lease cycle,
 * with nothing else of farm's in the process. Two parts, each on its own
 * private cluster:
 *
 * 1. CPU per cycle (fsync off: the disk is not what this part measures): the
 *    cycle's statements (the grant at once and the release) from one caller
 *    in series, several ways taking turns in rounds, while a change bus
 *    listens as this replica does (it receives its own notices):
 *    - "store + bus notices": PgLeaseStore as shipped, each change then
 *      published on the change bus (PgChangeBus, a statement of its own), as a
 *      replica runs a cycle;
 *    - "store + bus notices, none heard": the same through a bus that does not
 *      listen, so the notices are sent but not received back (what sending
 *      costs, without receiving; a replica receives every replica's notices);
 *    - "store, no notices": the two statements alone, through the store;
 *    - "store on one client, no notices": the same on one connection (no pool
 *      checkout and checkin per statement);
 *    - "bare pg, same text": the two statements' text through pg on one
 *      connection, no store code (rows as pg returns them);
 *    - "floor": the replicas bench's floor statements (an UPDATE … SKIP LOCKED
 *      grant, a one-line release) on one connection.
 *    Figures: this process's CPU per cycle (user + system) and wall time per
 *    cycle, medians over rounds, as ratios to "store + bus notices".
 *
 * 2. Commits with notices (fsync on, as the bench's replicas run): 8 clients,
 *    each a change (one-row INSERT) and its notice, three ways taking turns:
 *    "change alone", "change, then its notice" (two statements: how the bus
 *    sends), "change and notice in one statement" (`WITH … INSERT … RETURNING
 *    … SELECT pg_notify(…)`). Figures: changes per second and WAL flushes per
 *    change (pg_stat_wal), as ratios to "change, then its notice". A notifying
 *    transaction holds PostgreSQL's one notify lock from before its commit to
 *    its end, so a data change carrying its notice waits for its WAL flush
 *    holding it: commits stop sharing flushes.
 *
 * 3. What receiving a notice costs a replica (fsync off): a PgChangeBus
 *    listens in this process while PostgreSQL itself sends (a procedure, one
 *    commit per notice, `--gap-ms` apart, so each arrives alone, as at a
 *    replica's rates), ways taking turns in rounds: "another replica's
 *    change" (a lease row, parsed and delivered), "own, dropped unparsed"
 *    (this replica's, by the sender prefix), "own, parsed then dropped" (the
 *    previous format, as every replica received its own before), "4 changes
 *    coalesced in one notice" (per change), "on a channel not listened to"
 *    (what a channel per replica would leave: the process's own idle).
 *    Figures: this process's CPU per change, medians over rounds.
 *
 *   node test/dist/bench/pg-statement-cost.js [--cycles 1000] [--rounds 5] [--commit-s 3] [--notices 400] [--gap-ms 1] [--receive-only]
 */
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { randomUUID } from "node:crypto";
import { loadavg } from "node:os";
import pg from "pg";
import { createLogger } from "@farm/shared/log";
import { openPostgres } from "@farm/coordinator/db/open-postgres";
import { PgLeaseStore } from "@farm/coordinator/leases/pg-lease-store";
import type { LeasePhone } from "@farm/coordinator/leases/lease-store";
import { PgChangeBus } from "@farm/coordinator/replicas/pg-change-bus";
import { startPgCluster } from "../support/pg-cluster.js";
import { median } from "./proc-stats.js";
import { emitReport, round } from "./bench-report.js";

const { values } = parseArgs({
  options: {
    cycles: { type: "string", default: "1000" },
    rounds: { type: "string", default: "5" },
    "commit-s": { type: "string", default: "3" },
    notices: { type: "string", default: "400" },
    "gap-ms": { type: "string", default: "1" },
    // Part 3 alone.
    "receive-only": { type: "boolean", default: false },
  },
});
const NOTICES = Number(values.notices);
const GAP_MS = Number(values["gap-ms"]);
const CYCLES = Number(values.cycles);
const ROUNDS = Number(values.rounds);
const COMMIT_S = Number(values["commit-s"]);
const COMMIT_CLIENTS = 8;

const PHONES: LeasePhone[] = Array.from({ length: 10 }, (_, i) => ({ physicalId: `pd-${i}`, agentId: "a-1", serial: `S-${i}` }));
const REPLICA = "11111111-aaaa-4aaa-8aaa-000000000001";

type Cycle = () => Promise<void>;

function lease(): { leaseId: string; tokenHash: string; holder: string; acquiredAt: number; expiresAt: number; ttlMs: number; state: "active"; endedAt: null } {
  const now = Date.now();
  const id = randomUUID();
  return { leaseId: id, tokenHash: `h-${id}`, holder: "bench", acquiredAt: now, expiresAt: now + 60_000, ttlMs: 60_000, state: "active", endedAt: null };
}

/** One cycle through a store: grant at once, then release; the bus, when given, tells of each as a replica does. */
function storeCycle(store: PgLeaseStore, bus?: PgChangeBus): Cycle {
  return async () => {
    const l = lease();
    const phone = await store.insertLeaseOnAnyFree(l, PHONES);
    if (!phone) throw new Error("no phone free: the bench leaves none held");
    if (bus) await bus.publish("lease", l.leaseId, { ...l, ...phone });
    const ended = await store.releaseByTokenHash(l.tokenHash, Date.now());
    if (!ended) throw new Error("the release found no lease");
    if (bus) await bus.publish("lease", l.leaseId, ended);
  };
}

// The grant at once and the release as PgLeaseStore sends them (pg-lease-store.ts).
const GRANT_TEXT = `
  INSERT INTO leases (lease_id, token_hash, holder, physical_id, agent_id, serial, acquired_at, expires_at, ttl_ms, state, ended_at)
  SELECT $1, $2, $3, c.physical_id, c.agent_id, c.serial, $4, $5, $6, 'active', NULL
  FROM (SELECT e->>'p' AS physical_id, e->>'a' AS agent_id, e->>'s' AS serial, n FROM jsonb_array_elements($7::jsonb) WITH ORDINALITY AS t(e, n)) c
  WHERE NOT EXISTS (SELECT 1 FROM lease_waiters)
    AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.physical_id = c.physical_id AND l.state = 'active')
    AND NOT EXISTS (SELECT 1 FROM device_cleanup dc WHERE dc.physical_id = c.physical_id)
  ORDER BY c.n LIMIT 1
  ON CONFLICT (physical_id) WHERE state = 'active' DO NOTHING
  RETURNING physical_id, agent_id, serial`;
const RELEASE_TEXT = `
  UPDATE leases SET state = 'released', ended_at = $2 WHERE token_hash = $1 AND state = 'active' AND ($3::text IS NULL OR holder = $3)
  RETURNING lease_id, token_hash, holder, physical_id, agent_id, serial, acquired_at, expires_at, ttl_ms, state, ended_at,
    (has_sessions OR EXISTS (SELECT 1 FROM sessions s WHERE s.lease_id = leases.lease_id AND s.status = 'running')) AS running_sessions`;

function bareCycle(client: pg.Client): Cycle {
  return async () => {
    const l = lease();
    const phones = JSON.stringify(PHONES.map((c) => ({ p: c.physicalId, a: c.agentId, s: c.serial })));
    const g = await client.query({ name: "bench_grant", text: GRANT_TEXT, values: [l.leaseId, l.tokenHash, l.holder, l.acquiredAt, l.expiresAt, l.ttlMs, phones] });
    if (g.rows.length !== 1) throw new Error("no phone free");
    const r = await client.query({ name: "bench_release", text: RELEASE_TEXT, values: [l.tokenHash, Date.now(), null] });
    if (r.rows.length !== 1) throw new Error("the release found no lease");
  };
}

function floorCycle(client: pg.Client): Cycle {
  return async () => {
    const g = await client.query<{ id: number }>(
      "UPDATE bench_floor_phones SET holder = $1 WHERE id = (SELECT id FROM bench_floor_phones WHERE holder IS NULL LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id",
      ["w"],
    );
    const id = g.rows[0]?.id;
    if (id === undefined) throw new Error("no floor phone free");
    await client.query("UPDATE bench_floor_phones SET holder = NULL WHERE id = $1", [id]);
  };
}

/** CPU (this process) and wall time per cycle, in microseconds. */
async function measure(cycle: Cycle): Promise<{ cpuUs: number; wallUs: number }> {
  for (let i = 0; i < 50; i++) await cycle();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < CYCLES; i++) await cycle();
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { cpuUs: (cpu.user + cpu.system) / CYCLES, wallUs: (wall * 1000) / CYCLES };
}

async function client(url: string, clients: pg.Client[]): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  clients.push(c);
  return c;
}

const BASE = "store + bus notices";

async function cpuPart(): Promise<Record<string, { cpuUs: number; cpuRatio: number; wallUs: number; wallRatio: number }>> {
  const cluster = await startPgCluster({ fast: true });
  const opened = await openPostgres(cluster.url, { poolSize: 4 });
  const clients: pg.Client[] = [];
  const log = createLogger({ level: "error" });
  // Closing a bus ends its listening connection only: it still sends on the pool. Each way opens its
  // own, so only the way that listens has a listening connection (a listener hears every notice sent).
  const deaf = await PgChangeBus.open(cluster.url, opened.pool, randomUUID(), log);
  await deaf.close();
  const pooled = new PgLeaseStore(opened.db, opened.pool);
  let bus: PgChangeBus | undefined;
  const listening: Cycle = async () => {
    bus ??= await PgChangeBus.open(cluster.url, opened.pool, REPLICA, log);
    await storeCycle(pooled, bus)();
  };
  try {
    const setup = await client(cluster.url, clients);
    await setup.query("CREATE TABLE bench_floor_phones (id int PRIMARY KEY, holder text)");
    await setup.query("INSERT INTO bench_floor_phones SELECT g, NULL FROM generate_series(1, 10) g");
    // A pg.Client answers query() as the pool does: the store's statements on one connection.
    const single = new PgLeaseStore(opened.db, (await client(cluster.url, clients)) as unknown as pg.Pool);
    const ways: [string, Cycle][] = [
      [BASE, listening],
      ["store + bus notices, none heard", storeCycle(pooled, deaf)],
      ["store, no notices", storeCycle(pooled)],
      ["store on one client, no notices", storeCycle(single)],
      ["bare pg, same text", bareCycle(await client(cluster.url, clients))],
      ["floor", floorCycle(await client(cluster.url, clients))],
    ];
    const results = new Map<string, { cpu: number[]; wall: number[] }>(ways.map(([w]) => [w, { cpu: [], wall: [] }]));
    const load0 = loadavg()[0]!;
    for (let r = 0; r < ROUNDS; r++) {
      // Each round in another order, so no way always follows the same one.
      for (const [name, cycle] of r % 2 === 0 ? ways : [...ways].reverse()) {
        const m = await measure(cycle);
        results.get(name)!.cpu.push(m.cpuUs);
        results.get(name)!.wall.push(m.wallUs);
        await bus?.close();
        bus = undefined;
      }
    }
    const load1 = loadavg()[0]!;
    const baseCpu = median(results.get(BASE)!.cpu);
    const baseWall = median(results.get(BASE)!.wall);
    console.log(`1. pg client per lease cycle (grant at once + release), one caller in series, fsync off, ${CYCLES} cycles x ${ROUNDS} rounds (load average ${load0.toFixed(1)} -> ${load1.toFixed(1)})`);
    console.log(`  ${"way".padEnd(34)} ${"CPU us/cycle".padStart(13)} ${"ratio".padStart(6)} ${"wall us/cycle".padStart(14)} ${"ratio".padStart(6)}`);
    const out: Record<string, { cpuUs: number; cpuRatio: number; wallUs: number; wallRatio: number }> = {};
    for (const [name] of ways) {
      const cpu = median(results.get(name)!.cpu);
      const wall = median(results.get(name)!.wall);
      console.log(`  ${name.padEnd(34)} ${cpu.toFixed(0).padStart(13)} ${(cpu / baseCpu).toFixed(2).padStart(6)} ${wall.toFixed(0).padStart(14)} ${(wall / baseWall).toFixed(2).padStart(6)}`);
      out[name] = { cpuUs: round(cpu, 1), cpuRatio: round(cpu / baseCpu, 2), wallUs: round(wall, 1), wallRatio: round(wall / baseWall, 2) };
    }
    return out;
  } finally {
    await bus?.close();
    for (const c of clients) await c.end().catch(() => undefined);
    await opened.close();
    await cluster.stop();
  }
}

const COMMIT_WAYS = ["change alone", "change, then its notice", "change and notice in one statement"] as const;

async function commitRound(clients: pg.Client[], way: (typeof COMMIT_WAYS)[number]): Promise<{ perSecond: number; flushesPerChange: number }> {
  const [admin, ...callers] = clients;
  const flushes = async () => Number((await admin!.query<{ wal_sync: string }>("SELECT wal_sync FROM pg_stat_wal")).rows[0]!.wal_sync);
  const change: (c: pg.Client) => Promise<void> = way === "change alone" ?
    async (c) => void (await c.query({ name: "bench_change", text: "INSERT INTO bench_changes (v) VALUES ($1)", values: ["x"] })) :
    way === "change, then its notice" ?
    async (c) => {
      await c.query({ name: "bench_change", text: "INSERT INTO bench_changes (v) VALUES ($1)", values: ["x"] });
      await c.query({ name: "bench_notice", text: "SELECT pg_notify('bench_changes', $1)", values: ["x"] });
    } :
    async (c) => void (await c.query({ name: "bench_change_noticed", text: "WITH i AS (INSERT INTO bench_changes (v) VALUES ($1) RETURNING v) SELECT pg_notify('bench_changes', v) FROM i", values: ["x"] }));
  const before = await flushes();
  let n = 0;
  const t0 = performance.now();
  const end = t0 + COMMIT_S * 1000;
  await Promise.all(callers.map(async (c) => {
    while (performance.now() < end) {
      await change(c);
      n++;
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  return { perSecond: n / seconds, flushesPerChange: ((await flushes()) - before) / n };
}

async function commitPart(): Promise<Record<string, { perSecond: number; ratio: number; flushesPerChange: number }>> {
  const cluster = await startPgCluster();
  const clients: pg.Client[] = [];
  try {
    for (let i = 0; i <= COMMIT_CLIENTS; i++) await client(cluster.url, clients);
    await clients[0]!.query("CREATE TABLE bench_changes (id bigserial PRIMARY KEY, v text)");
    // Someone listens, as the replicas do (a notice nobody listens for is dropped at once).
    await client(cluster.url, clients).then((l) => l.query("LISTEN bench_changes"));
    const listening = clients.pop()!;
    const results = new Map<string, { rate: number[]; flushes: number[] }>(COMMIT_WAYS.map((w) => [w, { rate: [], flushes: [] }]));
    const load0 = loadavg()[0]!;
    for (let r = 0; r < ROUNDS; r++) {
      for (const way of r % 2 === 0 ? COMMIT_WAYS : [...COMMIT_WAYS].reverse()) {
        const m = await commitRound(clients, way);
        results.get(way)!.rate.push(m.perSecond);
        results.get(way)!.flushes.push(m.flushesPerChange);
      }
    }
    const load1 = loadavg()[0]!;
    await listening.end();
    const base = median(results.get("change, then its notice")!.rate);
    console.log(`2. commits with notices, ${COMMIT_CLIENTS} clients, fsync on, ${COMMIT_S} s x ${ROUNDS} rounds (load average ${load0.toFixed(1)} -> ${load1.toFixed(1)})`);
    console.log(`  ${"way".padEnd(36)} ${"changes/s".padStart(10)} ${"ratio".padStart(6)} ${"WAL flushes/change".padStart(19)}`);
    const out: Record<string, { perSecond: number; ratio: number; flushesPerChange: number }> = {};
    for (const way of COMMIT_WAYS) {
      const rate = median(results.get(way)!.rate);
      const fl = median(results.get(way)!.flushes);
      console.log(`  ${way.padEnd(36)} ${rate.toFixed(0).padStart(10)} ${(rate / base).toFixed(2).padStart(6)} ${fl.toFixed(2).padStart(19)}`);
      out[way] = { perSecond: Math.round(rate), ratio: round(rate / base, 2), flushesPerChange: round(fl, 2) };
    }
    return out;
  } finally {
    for (const c of clients) await c.end().catch(() => undefined);
    await cluster.stop();
  }
}

const RECEIVE_WAYS = ["another replica's change", "own, dropped unparsed", "own, parsed then dropped", "4 changes coalesced in one notice", "on a channel not listened to"] as const;

/** Part 3: this process's CPU per change received, by way (see the header). */
async function receivePart(): Promise<Record<string, { cpuUs: number; ratio: number }>> {
  const cluster = await startPgCluster({ fast: true });
  const pool = new pg.Pool({ connectionString: cluster.url, max: 2 });
  const bus = await PgChangeBus.open(cluster.url, pool, REPLICA, createLogger({ level: "error" }));
  const sender = new pg.Client({ connectionString: cluster.url });
  await sender.connect();
  try {
    // PostgreSQL sends: one commit per notice (each delivered on its own), `gap` seconds apart.
    await sender.query(`CREATE PROCEDURE bench_notify(ch text, payload text, n int, gap float8) LANGUAGE plpgsql AS $$
      BEGIN FOR i IN 1..n LOOP PERFORM pg_notify(ch, payload); COMMIT; PERFORM pg_sleep(gap); END LOOP; END $$`);
    const other = "22222222-bbbb-4bbb-8bbb-000000000002";
    const row = { ...lease(), ...PHONES[0]! };
    let delivered = 0;
    bus.events.on("change", () => delivered++);
    const ways: Record<(typeof RECEIVE_WAYS)[number], { channel: string; payload: string; changes: number; expect: number }> = {
      "another replica's change": { channel: "farm_changes", payload: JSON.stringify({ f: other, k: "lease", i: row.leaseId, d: row }), changes: 1, expect: 1 },
      "own, dropped unparsed": { channel: "farm_changes", payload: JSON.stringify({ f: REPLICA, k: "lease", i: row.leaseId, d: row }), changes: 1, expect: 0 },
      "own, parsed then dropped": { channel: "farm_changes", payload: JSON.stringify({ k: "lease", i: row.leaseId, f: REPLICA, d: row }), changes: 1, expect: 0 },
      "4 changes coalesced in one notice": { channel: "farm_changes", payload: JSON.stringify({ f: other, k: "lease", i: row.leaseId, m: [row, row, row, row] }), changes: 4, expect: 4 },
      "on a channel not listened to": { channel: "farm_elsewhere", payload: JSON.stringify({ f: other, k: "lease", i: row.leaseId, d: row }), changes: 1, expect: 0 },
    };
    const samples: Record<string, number[]> = Object.fromEntries(RECEIVE_WAYS.map((w) => [w, []]));
    for (let r = 0; r < ROUNDS; r++) {
      for (const name of r % 2 === 0 ? RECEIVE_WAYS : [...RECEIVE_WAYS].reverse()) {
        const w = ways[name];
        // The same change rate every way: a notice carrying 4 changes comes 4 gaps after the one before.
        const n = Math.round(NOTICES / w.changes);
        const want = delivered + n * w.expect;
        const cpu0 = process.cpuUsage();
        await sender.query("CALL bench_notify($1, $2, $3, $4)", [w.channel, w.payload, n, (GAP_MS * w.changes) / 1000]);
        // The last notices may still be on their way: wait for those this way delivers (each way's own expectation).
        while (delivered < want) await new Promise((res) => setImmediate(res));
        const cpu = process.cpuUsage(cpu0);
        if (delivered !== want) throw new Error(`${name}: delivered ${delivered}, expected ${want}`);
        samples[name]!.push((cpu.user + cpu.system) / (n * w.changes));
      }
    }
    const base = median(samples["another replica's change"]!);
    return Object.fromEntries(RECEIVE_WAYS.map((w) => [w, { cpuUs: round(median(samples[w]!), 1), ratio: round(median(samples[w]!) / base, 2) }]));
  } finally {
    await sender.end();
    await bus.close();
    await pool.end();
    await cluster.stop();
  }
}

async function main(): Promise<void> {
  if (values["receive-only"]) {
    const receive = await receivePart();
    console.log(`receiving notices (${NOTICES} changes a way, ${GAP_MS} ms apart, ${ROUNDS} rounds, load ${loadavg()[0]!.toFixed(1)}): CPU per change`);
    for (const [w, x] of Object.entries(receive)) console.log(`  ${w.padEnd(36)} ${x.cpuUs.toFixed(1).padStart(7)} us  ${x.ratio.toFixed(2)}x`);
    return;
  }
  const cpu = await cpuPart();
  const commits = await commitPart();
  const receive = await receivePart();
  console.log(`receiving notices (${NOTICES} changes a way, ${GAP_MS} ms apart, ${ROUNDS} rounds, load ${loadavg()[0]!.toFixed(1)}): CPU per change`);
  for (const [w, x] of Object.entries(receive)) console.log(`  ${w.padEnd(36)} ${x.cpuUs.toFixed(1).padStart(7)} us  ${x.ratio.toFixed(2)}x`);
  const statementsOnly = cpu["store, no notices"]!;
  const inOne = commits["change and notice in one statement"]!;
  emitReport("pg-statement-cost", [
    {
      measure: "pg client CPU per lease cycle: the two statements alone, of a cycle with its two bus notices",
      instant: `${statementsOnly.cpuRatio}x`,
      realistic: null,
      baseline: `store + bus notices ${cpu[BASE]!.cpuUs.toFixed(0)} us; bare pg ${cpu["bare pg, same text"]!.cpuUs.toFixed(0)} us`,
      target: "reported",
      pass: null,
    },
    {
      measure: "changes/s with the notice in the change's statement, of change then notice",
      instant: `${inOne.ratio}x`,
      realistic: null,
      baseline: `change then notice ${commits["change, then its notice"]!.perSecond}/s`,
      target: "reported",
      pass: null,
    },
    {
      measure: "CPU per change received: own notice dropped unparsed, of another replica's",
      instant: `${receive["own, dropped unparsed"]!.ratio}x`,
      realistic: null,
      baseline: `another replica's change ${receive["another replica's change"]!.cpuUs} us; coalesced 4 in one ${receive["4 changes coalesced in one notice"]!.ratio}x`,
      target: "reported",
      pass: null,
    },
  ], { cycles: CYCLES, rounds: ROUNDS, cpu, commits, receive });
}

await main();
