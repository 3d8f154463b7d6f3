/**
 * Coordinator replicas on PostgreSQL against one coordinator on SQLite, in
 * the same run:
 *  - lease grant + release cycles per second (10 phones on lightweight
 *    agents, `--workers` callers in parallel; on replicas the callers and
 *    agents are spread over three replicas), target >= 500/s;
 *  - the added median latency of a call forwarded to the replica holding the
 *    agent against the same call on that replica (a read routed to a real
 *    agent with a simulated phone), target <= 2 ms;
 *  - each replica's CPU (fraction of one core) with `--agents` lightweight
 *    agents x 10 devices spread over the three, heartbeating every 5 s,
 *    against one SQLite coordinator carrying all of them; target <= 0.10.
 * PostgreSQL is a private cluster with its default durability (fsync on).
 *
 *   node test/dist/bench/replicas.js [--seconds 5] [--workers 8] [--calls 200] [--only leases]
 *
 * `--only leases` runs the lease cycles alone (SQLite baseline and replicas, same run);
 * `--pg-no-fsync` (diagnosis, not the figure to report) turns PostgreSQL's fsync off.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { noDelaySessionOptions } from "@farm/shared/no-delay";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { TokenKind, TokenService } from "@farm/shared/gen/farm/v1/token_service_pb";
import { adbConnect, SimDevice, startAdbServer } from "../devsim/index.js";
import { attachFakeAgent, fakeDevices } from "../support/fake-agent.js";
import { farm, startFarm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { startPgCluster } from "../support/pg-cluster.js";
import { makeTempDir } from "../support/temp-dir.js";
import { cpuSeconds, median, percentile } from "./proc-stats.js";
import { emitReport } from "./bench-report.js";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "5" },
    workers: { type: "string", default: "8" },
    calls: { type: "string", default: "200" },
    agents: { type: "string", default: "1000" },
    "window-s": { type: "string", default: "15" },
    only: { type: "string", default: "" },
    // Diagnosis only: PostgreSQL without fsync, to see how much of a cycle is the disk.
    "pg-no-fsync": { type: "boolean", default: false },
  },
});
const AGENTS = Number(values.agents);
const WINDOW_S = Number(values["window-s"]);
const SECONDS = Number(values.seconds);
const WORKERS = Number(values.workers);
const CALLS = Number(values.calls);
const any = { serial: "", physicalId: "", labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "" };

function auth(token: string, lease: () => string = () => ""): Interceptor {
  return (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    const l = lease();
    if (l) req.header.set("x-farm-lease", l);
    return next(req);
  };
}

/** `count` coordinator processes sharing a data dir and a database (none: SQLite), and the admin token the first wrote. */
async function startCoordinators(dir: string, name: string, database: string | undefined, count: number) {
  const data = join(dir, name);
  const procs: FarmProcess[] = [];
  for (let i = 0; i < count; i++) procs.push(await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", data, ...(database ? ["--database", database] : [])], { FARM_LOG_LEVEL: "warn" }));
  const admin = (await readFile(join(data, "admin.token"), "utf8")).trim();
  return { procs, admin, urls: procs.map((p) => String(p.ready["url"])) };
}

/** Coordinators (one or three) on a database, with 10 fake phones on agents spread over them. */
async function start(dir: string, name: string, database: string | undefined, count: number) {
  const { procs, admin, urls } = await startCoordinators(dir, name, database, count);
  const transports = urls.map((url) => createGrpcTransport({ baseUrl: url, interceptors: [auth(admin)], nodeOptions: noDelaySessionOptions() }));
  const stop = new AbortController();
  const tokens = createClient(TokenService, transports[0]!);
  for (let a = 0; a < 2; a++) {
    const token = (await tokens.createToken({ name: `${name}-lab-${a}`, kind: TokenKind.AGENT })).token;
    await attachFakeAgent({ url: urls[a % count]!, token, index: a, devices: fakeDevices(a, 5), heartbeatMs: 1000, signal: stop.signal });
  }
  for (const t of transports) {
    const registry = createClient(RegistryService, t);
    await waitFor("10 phones online", async () => ((await registry.listDevices({})).devices.filter((d) => d.state === "device").length === 10 ? true : undefined));
  }
  return {
    procs,
    urls,
    admin,
    leases: transports.map((t) => createClient(LeaseService, t)),
    stop: async () => {
      stop.abort();
      for (const p of procs) await p.stop();
    },
  };
}

async function cycles(leases: Client<typeof LeaseService>[]): Promise<number> {
  let n = 0;
  const end = performance.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      const via = leases[w % leases.length]!;
      while (performance.now() < end) {
        const g = await via.acquireLease({ selector: any, waitMs: 30_000, ttlMs: 60_000 });
        await via.releaseLease({ token: g.token });
        n++;
      }
    }),
  );
  return n / SECONDS;
}

/** CPU of each coordinator process (fraction of a core) over a window, with AGENTS fake agents x 10 devices spread over them. */
async function fleetCpu(dir: string, name: string, database: string | undefined, count: number): Promise<number[]> {
  const { procs, admin, urls } = await startCoordinators(dir, name, database, count);
  const stop = new AbortController();
  try {
    const tokens = createClient(TokenService, createGrpcTransport({ baseUrl: urls[0]!, interceptors: [auth(admin)] }));
    for (let a = 0; a < AGENTS; a++) {
      const token = (await tokens.createToken({ name: `${name}-fleet-${a}`, kind: TokenKind.AGENT })).token;
      await attachFakeAgent({ url: urls[a % count]!, token, index: 100 + a, devices: fakeDevices(100 + a, 10), heartbeatMs: 5000, signal: stop.signal });
    }
    const registry = createClient(RegistryService, createGrpcTransport({ baseUrl: urls[count - 1]!, interceptors: [auth(admin)] }));
    await waitFor("the fleet listed", async () => ((await registry.listAgents({ pageSize: 5000 })).agents.filter((x) => x.online).length >= AGENTS ? true : undefined), { timeoutMs: 300_000 });
    const before = procs.map((p) => cpuSeconds(p.pid));
    await new Promise((r) => setTimeout(r, WINDOW_S * 1000));
    return procs.map((p, i) => (cpuSeconds(p.pid) - (before[i] as number)) / WINDOW_S);
  } finally {
    stop.abort();
    for (const p of procs) await p.stop();
  }
}

async function main(): Promise<void> {
  const dir = await makeTempDir("bench-replicas");
  const cluster = await startPgCluster({ maxConnections: 200, preload: ["pg_stat_statements"], fast: values["pg-no-fsync"] });
  try {
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    await admin.query("CREATE DATABASE farm_bench");
    await admin.end();
    const pgUrl = cluster.url.replace(/\/postgres$/, "/farm_bench");

    const one = await start(dir.path, "sqlite", undefined, 1);
    const cpuBefore = one.procs.map((p) => cpuSeconds(p.pid));
    const sqlitePerSecond = await cycles(one.leases);
    const sqliteCpuPerCycleMs = (1000 * (cpuSeconds(one.procs[0]!.pid) - cpuBefore[0]!)) / (sqlitePerSecond * SECONDS);
    await one.stop();
    const three = await start(dir.path, "replicas", pgUrl, 3);
    // What the database did per cycle: statements (pg_stat_statements) and committed transactions.
    const stats = new pg.Client({ connectionString: pgUrl });
    await stats.connect();
    await stats.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
    const dbCounts = async () => {
      const x = await stats.query<{ commits: string; statements: string }>(
        `SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits,
                (SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database()) AS statements`,
      );
      return { commits: Number(x.rows[0]!.commits), statements: Number(x.rows[0]!.statements) };
    };
    const before = await dbCounts();
    const replicaCpuBefore = three.procs.map((p) => cpuSeconds(p.pid));
    const replicaPerSecond = await cycles(three.leases);
    // All three replicas' CPU for one cycle.
    const replicaCpuPerCycleMs = (1000 * three.procs.reduce((sum, p, i) => sum + cpuSeconds(p.pid) - replicaCpuBefore[i]!, 0)) / (replicaPerSecond * SECONDS);
    console.log(`  coordinator CPU per cycle: one on SQLite ${sqliteCpuPerCycleMs.toFixed(1)} ms, three replicas together ${replicaCpuPerCycleMs.toFixed(1)} ms`);
    const after = await dbCounts();
    const top = await stats.query<{ calls: string; query: string }>(
      `SELECT calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS query FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
       WHERE d.datname = current_database() ORDER BY calls DESC LIMIT 8`,
    );
    await stats.end();
    const cycleCount = replicaPerSecond * SECONDS;
    // Includes the replicas' heartbeats and this bench's two count queries over the window.
    const statementsPerCycle = (after.statements - before.statements) / cycleCount;
    const commitsPerCycle = (after.commits - before.commits) / cycleCount;
    console.log(`  per cycle on PostgreSQL: ${statementsPerCycle.toFixed(1)} statements, ${commitsPerCycle.toFixed(1)} transactions; most run (since start):`);
    for (const r of top.rows) console.log(`    ${r.calls.padStart(7)}  ${r.query}`);
    if (values.only === "leases") {
      await three.stop();
      console.log(`lease grant + release, 10 phones, ${WORKERS} callers, ${SECONDS} s`);
      console.log(`  one coordinator on SQLite     ${Math.round(sqlitePerSecond)} cycles/s`);
      console.log(`  three replicas on PostgreSQL  ${Math.round(replicaPerSecond)} cycles/s  (ratio to SQLite ${(replicaPerSecond / sqlitePerSecond).toFixed(2)}; to the 500/s target ${(replicaPerSecond / 500).toFixed(2)})`);
      return;
    }

    // A real agent with a simulated phone on replica 0; the same read through replica 0 and through replica 1.
    const adb = await startAdbServer();
    const phone = new SimDevice({ serialno: "REPL0001" });
    const serial = await adbConnect(adb.port, "127.0.0.1", await phone.listen());
    const env = { FARM_COORDINATOR: three.urls[0], FARM_TOKEN: three.admin, FARM_HOME: join(dir.path, "home"), FARM_CONFIG: join(dir.path, "none.json") };
    const token = await farm(["token", "create", "--kind", "agent", "--name", "real"], env);
    await writeFile(join(dir.path, "agent.token"), String(token.json["token"]), { mode: 0o600 });
    const agent = await startFarm([
      "agent",
      "--coordinator",
      three.urls[0]!,
      "--name",
      "real",
      "--data-dir",
      join(dir.path, "agent"),
      "--token-file",
      join(dir.path, "agent.token"),
      "--adb-port",
      String(adb.port),
      "--no-adb-start",
      "--lock-dir",
      join(dir.path, "locks"),
      "--heartbeat-interval",
      "1000",
    ], { FARM_LOG_LEVEL: "warn" });
    const devices = three.urls.map((url) => createClient(DeviceService, createGrpcTransport({ baseUrl: url, interceptors: [auth(three.admin)], nodeOptions: noDelaySessionOptions() })));
    await waitFor("the phone online on replica 1", async () => ((await devices[1]!.getOwnership({ target: { serial } }).then(() => true, () => undefined)) ? true : undefined));
    const same: number[] = [];
    const forwarded: number[] = [];
    for (let i = 0; i < CALLS + 20; i++) {
      let t = performance.now();
      await devices[0]!.getOwnership({ target: { serial } });
      const s = performance.now() - t;
      t = performance.now();
      await devices[1]!.getOwnership({ target: { serial } });
      const f = performance.now() - t;
      if (i < 20) continue;
      same.push(s);
      forwarded.push(f);
    }
    await agent.stop();
    await phone.close();
    await adb.stop();
    await three.stop();

    const sqliteCpu = (await fleetCpu(dir.path, "fleet-sqlite", undefined, 1))[0] as number;
    const admin2 = new pg.Client({ connectionString: cluster.url });
    await admin2.connect();
    await admin2.query("CREATE DATABASE farm_fleet");
    await admin2.end();
    const replicaCpu = await fleetCpu(dir.path, "fleet-replicas", cluster.url.replace(/\/postgres$/, "/farm_fleet"), 3);

    const added = median(forwarded) - median(same);
    const report = {
      seconds: SECONDS,
      workers: WORKERS,
      sqliteCyclesPerSecond: Math.round(sqlitePerSecond),
      replicaCyclesPerSecond: Math.round(replicaPerSecond),
      replicasToSqlite: Number((replicaPerSecond / sqlitePerSecond).toFixed(2)),
      replicasToTarget500: Number((replicaPerSecond / 500).toFixed(2)),
      statementsPerCycle: Number(statementsPerCycle.toFixed(1)),
      sqliteCpuPerCycleMs: Number(sqliteCpuPerCycleMs.toFixed(1)),
      replicaCpuPerCycleMs: Number(replicaCpuPerCycleMs.toFixed(1)),
      transactionsPerCycle: Number(commitsPerCycle.toFixed(1)),
      sameReplicaReadMedianMs: Number(median(same).toFixed(2)),
      forwardedReadMedianMs: Number(median(forwarded).toFixed(2)),
      forwardedAddedMedianMs: Number(added.toFixed(2)),
      forwardedAddedP99Ms: Number((percentile(forwarded, 99) - percentile(same, 99)).toFixed(2)),
      forwardedToSameRatio: Number((median(forwarded) / median(same)).toFixed(2)),
      fleetAgents: AGENTS,
      sqliteCoordinatorCpu: Number(sqliteCpu.toFixed(3)),
      replicaCpu: replicaCpu.map((c) => Number(c.toFixed(3))),
      replicaCpuToTarget: Number((Math.max(...replicaCpu) / 0.1).toFixed(2)),
      replicaCpuToSqlite: Number((Math.max(...replicaCpu) / sqliteCpu).toFixed(2)),
    };
    console.log(`lease grant + release, 10 phones, ${WORKERS} callers, ${SECONDS} s`);
    console.log(`  one coordinator on SQLite     ${report.sqliteCyclesPerSecond} cycles/s`);
    console.log(`  three replicas on PostgreSQL  ${report.replicaCyclesPerSecond} cycles/s  (ratio to SQLite ${report.replicasToSqlite}; to the 500/s target ${report.replicasToTarget500})`);
    console.log(`a read routed to the agent, ${CALLS} calls`);
    console.log(`  on the agent's replica        median ${report.sameReplicaReadMedianMs} ms`);
    console.log(`  through another replica       median ${report.forwardedReadMedianMs} ms  (added ${report.forwardedAddedMedianMs} ms, target <= 2; ratio ${report.forwardedToSameRatio})`);
    console.log(`${AGENTS} agents x 10 devices, heartbeats every 5 s, over ${WINDOW_S} s`);
    console.log(`  one coordinator on SQLite     ${report.sqliteCoordinatorCpu} of a core`);
    console.log(`  each of three replicas        ${report.replicaCpu.join(", ")} of a core  (busiest to the 0.10 target ${report.replicaCpuToTarget}; to SQLite ${report.replicaCpuToSqlite})`);
    emitReport(
      "replicas",
      [
        { measure: "lease cycles, three replicas on PostgreSQL", instant: `${report.replicaCyclesPerSecond}/s`, realistic: null, target: ">= 500/s", pass: report.replicaCyclesPerSecond >= 500 },
        { measure: "read forwarded through another replica, added", instant: `+${report.forwardedAddedMedianMs} ms`, realistic: null, target: "<= +2 ms", pass: report.forwardedAddedMedianMs <= 2 },
        { measure: `busiest replica CPU, ${AGENTS} agents`, instant: `${(Math.max(...replicaCpu) * 100).toFixed(1)}% of a core`, realistic: null, target: "<= 10%", pass: Math.max(...replicaCpu) <= 0.1 },
      ],
      report,
    );
  } finally {
    await cluster.stop();
    await dir.remove();
  }
}

await main();
process.exit(0);
