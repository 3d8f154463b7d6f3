/**
 * The floors of a lease cycle across replicas, for the replicas bench's
 * table (the same run, the same cluster, the same callers): the same two
 * decisions with less and less of farm's work around them.
 *
 * (a) statements: the grant as one `UPDATE … WHERE id = (SELECT … FOR UPDATE
 *     SKIP LOCKED LIMIT 1) RETURNING`, the release as one `UPDATE`, from
 *     plain pg clients (one connection per caller);
 * (b) + notices: the same, each change then told as a replica does (a
 *     lease-row-sized `pg_notify` of its own on one of three "replicas'"
 *     connections, not awaited by the caller), heard by three plain listeners;
 * (c) + bare HTTP/2 servers: three processes (lease-floor-server.ts), each
 *     serving grant and release over `node:http2` and doing (b)'s work on a
 *     pg pool; callers spread over them as over the replicas.
 *
 * Each returns cycles per second and, where processes of its own do the work,
 * their CPU per cycle.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { connect, type ClientHttp2Session } from "node:http2";
import { connect as tcpConnect } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import pg from "pg";
import { cpuSeconds } from "./proc-stats.js";

const GRANT = "UPDATE bench_floor_phones SET holder = $1 WHERE id = (SELECT id FROM bench_floor_phones WHERE holder IS NULL LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id";
const RELEASE = "UPDATE bench_floor_phones SET holder = NULL WHERE id = $1";
const PAYLOAD = JSON.stringify({ f: "floor", k: "lease", i: "0".repeat(36), d: { pad: "x".repeat(330) } });

export interface FloorFigures {
  perSecond: number;
  /** CPU per cycle (ms) of each server process, where the floor has some ((c) only). */
  serverCpuPerCycleMs: number[];
}

async function phones(url: string): Promise<void> {
  const setup = new pg.Client({ connectionString: url });
  await setup.connect();
  await setup.query("CREATE TABLE IF NOT EXISTS bench_floor_phones (id int PRIMARY KEY, holder text)");
  await setup.query("TRUNCATE bench_floor_phones");
  await setup.query("INSERT INTO bench_floor_phones SELECT g, NULL FROM generate_series(1, 10) g");
  await setup.end();
}

async function clients(url: string, n: number): Promise<pg.Client[]> {
  return Promise.all(Array.from({ length: n }, async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    return c;
  }));
}

/** (a), or (b) with `notices`: `workers` callers for `seconds`. */
export async function floorStatements(url: string, workers: number, seconds: number, notices = false): Promise<FloorFigures> {
  await phones(url);
  const callers = await clients(url, workers);
  // Each "replica" tells on a pool of its own, as a replica's bus sends on its pool.
  const tellers = notices ? [0, 1, 2].map(() => new pg.Pool({ connectionString: url, max: 2 })) : [];
  const listeners = notices ? await clients(url, 3) : [];
  let heard = 0;
  for (const l of listeners) {
    l.on("notification", (n) => {
      JSON.parse(n.payload ?? "{}");
      heard++;
    });
    await l.query("LISTEN bench_floor");
  }
  let n = 0;
  let sent = 0;
  const tell = (w: number) => {
    sent++;
    void tellers[w % 3]!.query("SELECT pg_notify('bench_floor', $1)", [PAYLOAD]);
  };
  const end = performance.now() + seconds * 1000;
  await Promise.all(callers.map(async (c, w) => {
    while (performance.now() < end) {
      const g = await c.query<{ id: number }>(GRANT, [`w${w}`]);
      const id = g.rows[0]?.id;
      if (id === undefined) continue;
      if (notices) tell(w);
      await c.query(RELEASE, [id]);
      if (notices) tell(w);
      n++;
    }
  }));
  // Every notice reaches every listener (a floor that dropped them would not be one).
  while (heard < sent * listeners.length) await new Promise((r) => setTimeout(r, 20));
  for (const c of [...callers, ...tellers, ...listeners]) await c.end();
  return { perSecond: n / seconds, serverCpuPerCycleMs: [] };
}

async function startServer(url: string): Promise<{ child: ChildProcess; session: ClientHttp2Session }> {
  const script = join(fileURLToPath(new URL(".", import.meta.url)), "lease-floor-server.js");
  const child = spawn(process.execPath, [script, url], { stdio: ["pipe", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", (l) => resolve(Number(l)));
    child.once("exit", (code) => reject(new Error(`lease floor server exited with ${code}`)));
  });
  // Nagle off, as farm's clients have it (a small write would otherwise wait for the peer's delayed ACK).
  const session = connect(`http://127.0.0.1:${port}`, { createConnection: () => tcpConnect({ host: "127.0.0.1", port, noDelay: true }) });
  await new Promise<void>((resolve, reject) => session.once("connect", () => resolve()).once("error", reject));
  return { child, session };
}

function call(session: ClientHttp2Session, path: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = session.request({ ":method": "POST", ":path": path });
    const chunks: Buffer[] = [];
    let status = 0;
    s.on("response", (h) => (status = Number(h[":status"])));
    s.on("data", (c: Buffer) => chunks.push(c));
    s.on("end", () => (status === 200 ? resolve(Buffer.concat(chunks).toString()) : reject(new Error(`floor server: ${status} ${Buffer.concat(chunks).toString()}`))));
    s.on("error", reject);
    s.end(body);
  });
}

/** (c): three bare HTTP/2 servers doing (b)'s work; caller w calls server w % 3, as the bench's callers do replicas. */
export async function floorHttp2(url: string, workers: number, seconds: number): Promise<FloorFigures> {
  await phones(url);
  const servers = await Promise.all([0, 1, 2].map(() => startServer(url)));
  try {
    const before = servers.map((s) => cpuSeconds(s.child.pid!));
    let n = 0;
    const end = performance.now() + seconds * 1000;
    await Promise.all(Array.from({ length: workers }, async (_, w) => {
      const via = servers[w % servers.length]!.session;
      while (performance.now() < end) {
        const id = await call(via, "/grant", `w${w}`);
        if (id === "") continue;
        await call(via, "/release", id);
        n++;
      }
    }));
    const cycles = n;
    return { perSecond: n / seconds, serverCpuPerCycleMs: servers.map((s, i) => (1000 * (cpuSeconds(s.child.pid!) - before[i]!)) / cycles) };
  } finally {
    for (const s of servers) {
      await new Promise<void>((resolve) => s.session.close(() => resolve()));
      s.child.stdin!.end();
      await new Promise((resolve) => s.child.once("exit", resolve));
    }
  }
}

/**
 * CPU seconds PostgreSQL has used so far: the postmaster, its live children,
 * and (through the postmaster's reaped-children times) those that exited.
 */
export function postgresCpuSeconds(clusterDir: string): number {
  const postmaster = Number(readFileSync(join(clusterDir, "data", "postmaster.pid"), "utf8").split("\n")[0]);
  const stat = readFileSync(`/proc/${postmaster}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime, stime, cutime, cstime (fields 14–17 overall), in clock ticks of 1/100 s.
  let total = (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / 100;
  for (const task of readdirSync(`/proc/${postmaster}/task`)) {
    const children = readFileSync(`/proc/${postmaster}/task/${task}/children`, "utf8").trim();
    for (const pid of children ? children.split(" ") : []) {
      try {
        total += cpuSeconds(Number(pid));
      } catch {
        // Exited between the listing and the read: counted in the postmaster's reaped times from now on.
      }
    }
  }
  return total;
}
