import { once } from "node:events";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "@farm/shared/log";
import { createTestDatabase } from "../db/testing/test-postgres.js";
import type { Change } from "./change-bus.js";
import { PgChangeBus } from "./pg-change-bus.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const log = createLogger({ level: "error" });

/** A fresh database and pool (dropped after the test), and two replicas' buses on it; `beforeBuses` sees the pool first. */
async function twoReplicas(max: number, beforeBuses: (pool: pg.Pool) => void = () => undefined): Promise<{ pool: pg.Pool; one: PgChangeBus; two: PgChangeBus }> {
  const database = await createTestDatabase();
  cleanups.push(() => database.drop());
  const pool = new pg.Pool({ connectionString: database.url, max });
  // pool.end() resolves while its clients still close; the drop's FORCE may then end one, which an
  // idle client reports as the pool's error (the coordinator's own pool listens too: open-postgres.ts).
  pool.on("error", () => undefined);
  cleanups.push(() => pool.end());
  beforeBuses(pool);
  const one = await PgChangeBus.open(database.url, pool, "11111111-aaaa-4aaa-8aaa-000000000001", log);
  cleanups.push(() => one.close());
  const two = await PgChangeBus.open(database.url, pool, "22222222-bbbb-4bbb-8bbb-000000000002", log);
  cleanups.push(() => two.close());
  return { pool, one, two };
}

/** Every notice on the channel, raw, as a plain pg client hears it (its own connection, closed after the test). */
async function plainListener(pool: pg.Pool): Promise<string[]> {
  const client = new pg.Client({ connectionString: (pool.options as { connectionString: string }).connectionString });
  await client.connect();
  cleanups.push(() => client.end());
  const heard: string[] = [];
  client.on("notification", (n) => heard.push(n.payload ?? ""));
  await client.query("LISTEN farm_changes");
  return heard;
}

/** Resolves once `ok()` holds, checked every 10 ms (no wall-clock margin: the test's timeout bounds it). */
async function waitUntil(ok: () => boolean): Promise<void> {
  while (!ok()) await new Promise((r) => setTimeout(r, 10));
}

/** The next change the bus delivers, or a failure after `ms`. */
function nextChange(bus: PgChangeBus, ms = 5_000): Promise<Change> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no change notice arrived")), ms);
    bus.events.once("change", (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
}

describe("change notices over LISTEN/NOTIFY", () => {
  it("delivers another replica's notices, never a replica's own, and after a lost connection listens again and asks for a resync", async () => {
    const { pool, one, two } = await twoReplicas(2);

    const own: Change[] = [];
    two.events.on("change", (c) => own.push(c));
    const heard = nextChange(one);
    await two.publish("lease", "lease-1");
    expect(await heard).toEqual({ kind: "lease", id: "lease-1", from: "22222222-bbbb-4bbb-8bbb-000000000002" });
    expect(own).toEqual([]);

    // The database drops replica one's listening connection (a restart, a failover, an idle kill).
    const resync = once(one.events, "resync");
    await pool.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'farm-listen-11111111' AND datname = current_database()");
    await resync;
    const after = nextChange(one);
    await two.publish("agent", "agent-7");
    expect(await after).toMatchObject({ kind: "agent", id: "agent-7" });
  });

  it("sends changes published while one is on its way together, in the order published: lease rows side by side as one notice, the others one each", async () => {
    // Counts the statements the bus sends on the pool (the pool itself is real), and the notices on the channel (a plain listener).
    let statements = 0;
    const { pool, one, two } = await twoReplicas(4, (pool) => {
      const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
      (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        statements++;
        return query(...args);
      };
    });
    const notices = await plainListener(pool);
    const heard: Change[] = [];
    const all = new Promise<void>((resolve) =>
      one.events.on("change", (c) => {
        heard.push(c);
        if (heard.length === 40) resolve();
      })
    );
    const rowOf = (i: number) => ({ leaseId: `lease-${i}`, pad: "x".repeat(300) });
    // Even: a lease row (coalesced with its neighbours); odd: a lease notice without one (a notice of its own).
    await Promise.all(Array.from({ length: 40 }, (_, i) => two.publish("lease", `lease-${i}`, i % 2 === 0 ? rowOf(i) : undefined)));
    await all;
    expect(heard.map((c) => c.id)).toEqual(Array.from({ length: 40 }, (_, i) => `lease-${i}`));
    expect(heard[0]).toEqual({ kind: "lease", id: "lease-0", from: "22222222-bbbb-4bbb-8bbb-000000000002", data: rowOf(0) });
    // All 40 published in one turn: 40 notices (no two rows side by side) in statements of at most 16.
    expect(statements).toBe(3);
    // The plain listener hears them on its own connection, maybe a moment after replica one.
    await waitUntil(() => notices.length >= 40);
    expect(notices.length).toBe(40);

    // 30 rows in one turn: as many rows per notice as fit under 7,000 bytes (21 of 332), in one statement.
    notices.length = 0;
    heard.length = 0;
    const thirty = new Promise<void>((resolve) => one.events.on("change", () => heard.length === 30 && resolve()));
    await Promise.all(Array.from({ length: 30 }, (_, i) => two.publish("lease", `lease-${100 + i}`, rowOf(100 + i))));
    await thirty;
    expect(heard.map((c) => c.data)).toEqual(Array.from({ length: 30 }, (_, i) => rowOf(100 + i)));
    expect(statements).toBe(4);
    await waitUntil(() => notices.length >= 2);
    expect(notices.map((n) => (JSON.parse(n) as { m?: unknown[] }).m?.length)).toEqual([21, 9]);
    for (const n of notices) expect(n.length).toBeLessThan(8000);
  });

  it("drops its own notices unparsed, reads a coalesced notice's rows one by one, and an older replica's notice as before", async () => {
    const { pool, one, two } = await twoReplicas(2);
    const own: Change[] = [];
    two.events.on("change", (c) => own.push(c));
    const heard: Change[] = [];
    one.events.on("change", (c) => heard.push(c));
    const from = "33333333-cccc-4ccc-8ccc-000000000003";
    const done = new Promise<void>((resolve) => one.events.on("change", (c) => c.id === "end" && resolve()));
    const notify = (payload: string) => pool.query("SELECT pg_notify('farm_changes', $1)", [payload]);
    // The previous version's notice (kind first), a coalesced one with a row lacking an id, one of another kind with rows (dropped), and two's own.
    await notify(JSON.stringify({ k: "lease", i: "old-1", f: from, d: { leaseId: "old-1" } }));
    await notify(JSON.stringify({ f: from, k: "lease", i: "c-1", m: [{ leaseId: "c-1" }, { nope: 1 }, null, { leaseId: "c-2" }] }));
    await notify(JSON.stringify({ f: from, k: "agent", i: "a-1", m: [{ leaseId: "x" }] }));
    await notify(JSON.stringify({ f: "22222222-bbbb-4bbb-8bbb-000000000002", k: "lease", i: "mine", d: { leaseId: "mine" } }));
    await notify(JSON.stringify({ f: from, k: "agent", i: "end" }));
    await done;
    expect(heard.map((c) => [c.kind, c.id, c.from, c.data])).toEqual([
      ["lease", "old-1", from, { leaseId: "old-1" }],
      ["lease", "c-1", from, { leaseId: "c-1" }],
      ["lease", "c-2", from, { leaseId: "c-2" }],
      ["lease", "mine", "22222222-bbbb-4bbb-8bbb-000000000002", { leaseId: "mine" }],
      ["agent", "end", from, undefined],
    ]);
    // Two heard everything but its own ("mine"), the one of another kind with rows still dropped.
    await waitUntil(() => own.some((c) => c.id === "end"));
    expect(own.map((c) => c.id)).toEqual(["old-1", "c-1", "c-2", "end"]);
  });

  it("sends one notice per change, at once, when not coalescing (the previous behaviour)", async () => {
    const database = await createTestDatabase();
    cleanups.push(() => database.drop());
    const pool = new pg.Pool({ connectionString: database.url, max: 4 });
    pool.on("error", () => undefined);
    cleanups.push(() => pool.end());
    const notices = await plainListener(pool);
    const bus = await PgChangeBus.open(database.url, pool, "44444444-dddd-4ddd-8ddd-000000000004", log, { coalesce: false });
    cleanups.push(() => bus.close());
    await Promise.all(Array.from({ length: 5 }, (_, i) => bus.publish("lease", `lease-${i}`, { leaseId: `lease-${i}` })));
    await waitUntil(() => notices.length === 5);
    expect(notices.map((n) => (JSON.parse(n) as { i: string }).i)).toEqual(["lease-0", "lease-1", "lease-2", "lease-3", "lease-4"]);
  });

  it("sends a lease's latest row only, when an earlier notice of that lease still waits, after what was published between them", async () => {
    const { one, two } = await twoReplicas(4);
    const heard: Change[] = [];
    const last = new Promise<void>((resolve) =>
      one.events.on("change", (c) => {
        heard.push(c);
        if (c.id === "lease-9" && (c.data as { state: string }).state === "released") resolve();
      })
    );
    const granted = { leaseId: "lease-9", state: "active" };
    const released = { leaseId: "lease-9", state: "released" };
    // The first goes at once; the others wait for it, and the release replaces the grant still waiting.
    const sent = [two.publish("agent", "agent-1"), two.publish("lease", "lease-9", granted), two.publish("cleanup", "pd-1", { state: "leased" }), two.publish("lease", "lease-9", released)];
    await Promise.all(sent);
    await last;
    expect(heard.map((c) => [c.kind, c.id, c.data])).toEqual([["agent", "agent-1", undefined], ["cleanup", "pd-1", { state: "leased" }], ["lease", "lease-9", released]]);
    // A lease notice published after the last one left is sent again.
    const again = nextChange(one);
    await two.publish("lease", "lease-9", granted);
    expect((await again).data).toEqual(granted);
  });
});
