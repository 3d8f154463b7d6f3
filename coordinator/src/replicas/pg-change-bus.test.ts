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

  it("sends notices published while one is on its way together, in the order published, each still a notice of its own", async () => {
    // Counts the statements the bus sends on the pool (the pool itself is real).
    let statements = 0;
    const { one, two } = await twoReplicas(4, (pool) => {
      const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
      (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        statements++;
        return query(...args);
      };
    });
    const heard: Change[] = [];
    const all = new Promise<void>((resolve) =>
      one.events.on("change", (c) => {
        heard.push(c);
        if (heard.length === 40) resolve();
      })
    );
    const row = { leaseId: "x".repeat(300) };
    await Promise.all(Array.from({ length: 40 }, (_, i) => two.publish("lease", `lease-${i}`, i % 2 === 0 ? row : undefined)));
    await all;
    expect(heard.map((c) => c.id)).toEqual(Array.from({ length: 40 }, (_, i) => `lease-${i}`));
    expect(heard[0]).toEqual({ kind: "lease", id: "lease-0", from: "22222222-bbbb-4bbb-8bbb-000000000002", data: row });
    // The first alone, the 39 published while it was on its way in statements of at most 16.
    expect(statements).toBe(4);
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
