/**
 * How a store is written, measured on its hot operations: the activity log
 * (one insert per routed call, a read by id, a page of 50 of one phone's
 * newest entries), four ways in the same run, on SQLite (a WAL file, as a
 * coordinator opens it) and on PostgreSQL (a private cluster):
 *  - drizzle: one implementation per dialect, drizzle's query builder on the
 *    dialect's schema (SQLite's insert prepared once), as the stores were;
 *  - kysely: one implementation for both (Kysely, db/store-db.ts), each
 *    statement built and compiled on every call;
 *  - kysely store: the activity store as shipped (kysely-activity-store.ts:
 *    Kysely, its insert compiled once);
 *  - sql text: one implementation for both, drizzle's `sql` template with the
 *    same text on both dialects and rows decoded by hand (as the
 *    idempotency and quota stores are written).
 * Each figure is the median over rounds (the ways take turns) of the time
 * per operation, and the process's CPU per operation; printed as ratios to
 * the per-dialect drizzle code measured alongside it.
 *
 *   node test/dist/bench/store-ops.js [--ops 2000] [--rounds 5]
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { and, desc, eq, lt, sql, type SQL } from "drizzle-orm";
import type { ActivityEntry, ActivityRow } from "@farm/coordinator/activity/activity-store";
import { postgresDatabase, sqliteDatabase, type FarmDatabase } from "@farm/coordinator/db/database";
import { openPostgres } from "@farm/coordinator/db/open-postgres";
import * as sqliteSchema from "@farm/coordinator/db/schema";
import * as pgSchema from "@farm/coordinator/db/pg-schema";
import { storeDbOf } from "@farm/coordinator/db/store-db";
import { createActivityStore } from "@farm/coordinator/db/stores";
import { startPgCluster } from "../support/pg-cluster.js";
import { makeTempDir } from "../support/temp-dir.js";
import { median } from "./proc-stats.js";
import { emitReport, round, type BenchRow } from "./bench-report.js";

const { values } = parseArgs({ options: { ops: { type: "string", default: "2000" }, rounds: { type: "string", default: "5" } } });
const OPS = Number(values.ops);
const ROUNDS = Number(values.rounds);

/** The three hot operations of the activity log. */
interface Ops {
  insert(e: ActivityEntry): Promise<ActivityRow>;
  get(id: number): Promise<ActivityRow | undefined>;
  page(serial: string, beforeId: number, limit: number): Promise<ActivityRow[]>;
}

const WAYS = ["drizzle", "kysely", "kysely store", "sql text"] as const;
type Way = (typeof WAYS)[number];

/** The per-dialect drizzle code, as sqlite-activity-store.ts and pg-activity-store.ts were. */
function drizzleOps(database: FarmDatabase): Ops {
  if (database.dialect === "sqlite") {
    const { db } = database;
    const t = sqliteSchema.activity;
    const insertOne = db
      .insert(t)
      .values(Object.fromEntries(COLUMNS.map((c) => [c, sql.placeholder(c)])) as unknown as ActivityEntry)
      .returning()
      .prepare();
    return {
      insert: async (e) => insertOne.get(e) as ActivityRow,
      get: async (id) => db.select().from(t).where(eq(t.id, id)).get(),
      page: async (serial, beforeId, limit) =>
        db
          .select()
          .from(t)
          .where(and(eq(t.serial, serial), lt(t.id, beforeId)))
          .orderBy(desc(t.id))
          .limit(limit)
          .all(),
    };
  }
  const { db } = database;
  const t = pgSchema.activity;
  return {
    insert: async (e) => (await db.insert(t).values(e).returning())[0]!,
    get: async (id) => (await db.select().from(t).where(eq(t.id, id)))[0],
    page: (serial, beforeId, limit) =>
      db
        .select()
        .from(t)
        .where(and(eq(t.serial, serial), lt(t.id, beforeId)))
        .orderBy(desc(t.id))
        .limit(limit),
  };
}

/** One implementation for both dialects, with Kysely. */
function kyselyOps(database: FarmDatabase): Ops {
  const db = storeDbOf(database);
  return {
    insert: (e) => db.insertInto("activity").values(e).returningAll().executeTakeFirstOrThrow(),
    get: (id) => db.selectFrom("activity").selectAll().where("id", "=", id).executeTakeFirst(),
    page: (serial, beforeId, limit) => db.selectFrom("activity").selectAll().where("serial", "=", serial).where("id", "<", beforeId).orderBy("id", "desc").limit(limit).execute(),
  };
}

/** One implementation for both dialects, with one SQL text each and rows decoded by hand. */
function sqlTextOps(database: FarmDatabase): Ops {
  const rows = async (q: SQL): Promise<Record<string, unknown>[]> => database.dialect === "sqlite" ? database.db.all(q) : (await database.db.execute(q)).rows;
  const decode = (r: Record<string, unknown>): ActivityRow => ({
    id: Number(r["id"]),
    at: Number(r["at"]),
    caller: String(r["caller"]),
    leaseId: String(r["lease_id"]),
    serial: String(r["serial"]),
    physicalId: String(r["physical_id"]),
    agentId: String(r["agent_id"]),
    command: String(r["command"]),
    outcome: String(r["outcome"]),
    durationMs: Number(r["duration_ms"]),
    requestId: String(r["request_id"]),
    detail: String(r["detail"]),
  });
  return {
    insert: async (e) =>
      decode(
        (await rows(sql`INSERT INTO activity (at, caller, lease_id, serial, physical_id, agent_id, command, outcome, duration_ms, request_id, detail)
          VALUES (CAST(${e.at} AS bigint), ${e.caller}, ${e.leaseId}, ${e.serial}, ${e.physicalId}, ${e.agentId}, ${e.command}, ${e.outcome}, CAST(${e.durationMs} AS bigint), ${e.requestId}, ${e.detail})
          RETURNING *`))[0]!,
      ),
    get: async (id) => {
      const r = (await rows(sql`SELECT * FROM activity WHERE id = CAST(${id} AS bigint)`))[0];
      return r ? decode(r) : undefined;
    },
    page: async (serial, beforeId, limit) => (await rows(sql`SELECT * FROM activity WHERE serial = ${serial} AND id < CAST(${beforeId} AS bigint) ORDER BY id DESC LIMIT CAST(${limit} AS integer)`)).map(decode),
  };
}

const COLUMNS = ["at", "caller", "leaseId", "serial", "physicalId", "agentId", "command", "outcome", "durationMs", "requestId", "detail"] as const;

function entry(i: number): ActivityEntry {
  return {
    at: 1_700_000_000_000 + i,
    caller: "bench-user",
    leaseId: `lease-${i % 50}`,
    serial: `serial-${i % 20}`,
    physicalId: `pd-${i % 20}`,
    agentId: "agent-1",
    command: "farm.v1.DeviceService/Tap",
    outcome: "ok",
    durationMs: 12,
    requestId: "",
    detail: "{\"x\":10,\"y\":20}",
  };
}

interface Figure {
  /** Median wall time per operation, µs. */
  us: number;
  /** Median process CPU per operation, µs. */
  cpuUs: number;
}

type OpName = "insert" | "get" | "page of 50";

/** Each way's figures per operation on one database; the ways take turns within every round. */
async function measure(database: FarmDatabase): Promise<Record<Way, Record<OpName, Figure>>> {
  const shipped = createActivityStore(database);
  const ways: Record<Way, Ops> = {
    drizzle: drizzleOps(database),
    kysely: kyselyOps(database),
    "kysely store": { insert: (e) => shipped.insert(e), get: (id) => shipped.get(id), page: (serial, beforeId, limit) => shipped.listBefore({ serial }, beforeId, limit) },
    "sql text": sqlTextOps(database),
  };
  // Rows to read: 20 phones' worth, so a page of one phone skips the others' through the index.
  let i = 0;
  const ids: number[] = [];
  for (; i < 5000; i++) ids.push((await ways.drizzle.insert(entry(i))).id);
  // The ways must read and write the same rows alike before any is timed.
  for (const way of WAYS) {
    const got = await ways[way].get(ids[10]!);
    if (JSON.stringify(got) !== JSON.stringify(await ways.drizzle.get(ids[10]!))) throw new Error(`${way}: get differs from drizzle's: ${JSON.stringify(got)}`);
    const page = await ways[way].page("serial-3", ids[ids.length - 1]! + 1, 50);
    if (page.length !== 50 || page[0]!.serial !== "serial-3" || page[0]!.id <= page[1]!.id) throw new Error(`${way}: a page is not 50 of serial-3's newest first`);
    const inserted = await ways[way].insert(entry(i++));
    if (inserted.id <= ids[ids.length - 1]! || inserted.caller !== "bench-user" || inserted.at !== 1_700_000_000_000 + i - 1) throw new Error(`${way}: insert returned ${JSON.stringify(inserted)}`);
    ids.push(inserted.id);
  }
  const samples: Record<Way, Record<OpName, Figure[]>> = Object.fromEntries(WAYS.map((w) => [w, { insert: [], get: [], "page of 50": [] }])) as never;
  const time = async (way: Way, op: OpName, n: number, run: (k: number) => Promise<unknown>) => {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let k = 0; k < n; k++) await run(k);
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    samples[way][op].push({ us: (wall * 1000) / n, cpuUs: (cpu.user + cpu.system) / n });
  };
  for (let r = 0; r < ROUNDS; r++) {
    for (const way of WAYS) {
      const ops = ways[way];
      await time(way, "insert", OPS, (k) => ops.insert(entry(i + k)));
      i += OPS;
      await time(way, "get", OPS, (k) => ops.get(ids[(k * 7919) % ids.length]!));
      await time(way, "page of 50", Math.max(1, Math.floor(OPS / 10)), (k) => ops.page(`serial-${k % 20}`, ids[ids.length - 1 - (k % 100)]!, 50));
    }
  }
  const out = {} as Record<Way, Record<OpName, Figure>>;
  for (const way of WAYS) {
    out[way] = {} as Record<OpName, Figure>;
    for (const op of ["insert", "get", "page of 50"] as const) {
      out[way][op] = { us: median(samples[way][op].map((s) => s.us)), cpuUs: median(samples[way][op].map((s) => s.cpuUs)) };
    }
  }
  return out;
}

async function main(): Promise<void> {
  const dir = await makeTempDir("bench-store-ops");
  const cluster = await startPgCluster();
  try {
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    await admin.query("CREATE DATABASE farm_store_ops");
    await admin.end();
    const databases: Record<"sqlite" | "postgres", FarmDatabase> = {
      sqlite: sqliteDatabase(join(dir.path, "coordinator.db")),
      postgres: postgresDatabase(await openPostgres(cluster.url.replace(/\/postgres$/, "/farm_store_ops"), { poolSize: 4 })),
    };
    const rows: BenchRow[] = [];
    const details: Record<string, unknown> = {};
    try {
      for (const dialect of ["sqlite", "postgres"] as const) {
        const figures = await measure(databases[dialect]);
        details[dialect] = figures;
        console.log(`activity store on ${dialect === "sqlite" ? "SQLite (WAL file)" : "PostgreSQL (private cluster, fsync on)"}: per operation, median of ${ROUNDS} rounds; ratio to drizzle per dialect`);
        for (const op of ["insert", "get", "page of 50"] as const) {
          const base = figures.drizzle[op];
          const cells = WAYS.map((w) => {
            const f = figures[w][op];
            return `${w} ${f.us.toFixed(1).padStart(7)} µs (cpu ${f.cpuUs.toFixed(1).padStart(6)} µs) ${(f.us / base.us).toFixed(2)}x/${(f.cpuUs / base.cpuUs).toFixed(2)}x cpu`;
          });
          console.log(`  ${op.padEnd(11)} ${cells.join("   ")}`);
          for (const w of ["kysely", "kysely store", "sql text"] as const) {
            rows.push({
              measure: `store ${op} on ${dialect}, ${w} / drizzle`,
              instant: `${(figures[w][op].us / base.us).toFixed(2)}x time, ${(figures[w][op].cpuUs / base.cpuUs).toFixed(2)}x cpu`,
              realistic: null,
              baseline: `drizzle ${round(base.us, 1)} µs`,
              target: "",
              pass: null,
            });
          }
        }
      }
      emitReport("store-ops", rows, details);
    } finally {
      await databases.sqlite.close();
      await databases.postgres.close();
    }
  } finally {
    await cluster.stop();
    await dir.remove();
  }
}

await main();
