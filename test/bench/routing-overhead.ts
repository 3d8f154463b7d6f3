/**
 * Routing overhead: `shell echo` through the coordinator and the agent
 * (`farm standalone`; the client library the CLI uses, with a lease; the
 * shell journaled as a device job) against the same command sent directly
 * with adbkit on the agent host, same phone, same run, interleaved. Also
 * the phone's own share (the job's script sent directly) and a read routed
 * to the agent (ownership status), which skips the journal.
 *
 * Run twice: on an instant phone (farm's own milliseconds; the target) and
 * on one under the pixel-usb latency profile (the ratio a user sees).
 *
 * Stage by stage: the standalone runs with FARM_STAGE_TRACE (shared/src/
 * stage-trace.ts), so the coordinator and the agent mark each routed call
 * on the system's monotonic clock; the client marks its call site. Each
 * stage's median is printed beside the bare floor of that stage, measured
 * in the same rounds (bare-floor.ts): a bare node:http2 unary hop, a round
 * trip on an open stream, one durable SQLite commit, the job script sent
 * directly right after such a commit (as the routed job follows the
 * journal's). The target row: added <= 3 ms and <= 2x the sum of the
 * floors (hop + round trip + commit + the job script's share). The client
 * hop is also split at the coordinator's request gate and unary fast path
 * (their marks; calls over --protocol connect do not pass there).
 *
 * CPU, which a loaded machine inflates less than wall time: each stage one
 * process marks at both ends shows that process's CPU beside its wall time,
 * and each routed call the standalone main thread's CPU. The slowest 1 % of
 * routed shells are printed stage by stage (what the p99 is made of). The
 * direct echo and job are also made from a process of their own
 * (direct-client.ts): in this process, which simulates the phone, their
 * client never waits for a sleeping process between adb messages, while
 * the agent does; both figures are printed, the target rows use the first.
 *
 *   node test/dist/bench/routing-overhead.js [--calls 300] [--realistic-calls 40] [--protocol connect|grpc]
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { createClient } from "@connectrpc/connect";
import { DeviceJobs } from "@farm/agent/actions/device-job";
import type { ActionRow } from "@farm/agent/ownership/ownership-journal";
import { farmTransport } from "@farm/shared/farm-transport";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { Health } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { monotonicMs, TRACE_HEADER, type StageMark } from "@farm/shared/stage-trace";
import type { LatencyProfileName } from "../devsim/latency/latency-profiles.js";
import { startLab, type Lab } from "../support/lab.js";
import { addedMs, emitReport, ms, round } from "./bench-report.js";
import { median, percentile } from "./proc-stats.js";
import { startBareFloor, type BareFloor } from "./bare-floor.js";

const { values } = parseArgs({ options: { calls: { type: "string", default: "300" }, "realistic-calls": { type: "string", default: "40" }, protocol: { type: "string", default: "grpc" } } });
const N = Number(values.calls);
const NR = Number(values["realistic-calls"]);
const protocol = values.protocol === "connect" ? "connect" : "grpc";
const adbkit = createRequire(import.meta.url)("@devicefarmer/adbkit") as { Adb: { createClient(o: { port: number }): AdbkitClient; util: { readAll(s: unknown): Promise<Buffer> } } };
interface AdbkitClient {
  getDevice(serial: string): { shell(cmd: string): Promise<unknown> };
}

interface Series {
  bare: number[];
  job: number[];
  routed: number[];
  read: number[];
  /** Bare floors, one of each per round. */
  hop: number[];
  rtt: number[];
  commit: number[];
  /** CPU per call: the standalone's main thread (coordinator and agent) and the bench process (client and the simulated phone), in ms. */
  /** The direct echo and job again, from a process other than the phone's (direct-client.ts). */
  bareApart: number[];
  jobApart: number[];
  routedCpu: number[];
  clientCpu: number[];
  readCpu: number[];
}

/** The client's own marks (call site), by trace id: start and end on the monotonic clock. */
const clientMarks = new Map<string, { start: number; end: number }>();
/** Each timed routed call's wall time by trace id, for the tail's stages. */
const wallById = new Map<string, number>();

/**
 * CPU a process's main thread has run so far, in ms: /proc's schedstat is in
 * nanoseconds (stat's ticks are 10 ms, too coarse for one call). The main
 * thread is where the coordinator and the agent run every call's JavaScript
 * and the journal's SQLite.
 */
function mainThreadCpuMs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ")[0]) / 1e6;
}
const ownCpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/** The direct calls from a process of their own (direct-client.ts): one call at a time, its milliseconds. */
interface DirectApart {
  call(kind: "echo" | "job", serial: string): Promise<number>;
  close(): Promise<void>;
}

async function startDirectApart(adbPort: number): Promise<DirectApart> {
  const child = spawn(process.execPath, [join(import.meta.dirname, "direct-client.js"), String(adbPort)], { stdio: ["pipe", "pipe", "inherit"] });
  const answers = createInterface({ input: child.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
  return {
    async call(kind, serial) {
      child.stdin?.write(`${kind} ${serial}\n`);
      const { value, done } = await answers.next();
      if (done) throw new Error("the direct client exited");
      const line = String(value);
      if (line.startsWith("error")) throw new Error(`direct ${kind} failed: ${line}`);
      return Number(line);
    },
    async close() {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.stdin?.end();
      await exited;
    },
  };
}

async function measure(lab: Lab, admin: string, latency: LatencyProfileName, serialno: string, calls: number, floor: BareFloor, apart: DirectApart, tag: string): Promise<Series> {
  const { serial, device } = await lab.addDevice({ serialno, latency, latencySeed: 23 });
  // Each series meets the same phone delays: reseeded alike before each call (see DeviceLatency).
  const same = (i: number) => device.state.latency.reseed(300 + i);
  // The client library the CLI uses (farmTransport), with the lease as the CLI sends it.
  const url = String(lab.standalone.ready["url"]);
  const lease = (await createClient(LeaseService, farmTransport({ url, token: admin, protocol })).acquireLease({ selector: { serial }, ttlMs: 600_000 })).token;
  const devices = createClient(DeviceService, farmTransport({ url, token: admin, headers: { "x-farm-lease": lease }, protocol }));
  const direct = adbkit.Adb.createClient({ port: lab.adb.port }).getDevice(serial);
  // What the phone runs for a journaled shell (a detached job with its completion record), sent directly: the phone's share of the difference.
  const jobs = new DeviceJobs({ host: "127.0.0.1", port: lab.adb.port }, () => []);
  const runJob = async () => {
    const action = { actionId: randomUUID(), requestSha256: "0".repeat(64), createdAt: Date.now() } as ActionRow;
    const r = await jobs.run(serial, "echo hi", action, AbortSignal.timeout(10_000), { phase: "before", note: () => {}, released: new AbortController().signal });
    void jobs.acknowledge(serial, action);
    return r;
  };
  const s: Series = { bare: [], job: [], routed: [], read: [], hop: [], rtt: [], commit: [], bareApart: [], jobApart: [], routedCpu: [], clientCpu: [], readCpu: [] };
  const pid = lab.standalone.pid;
  const warm = Math.min(20, Math.ceil(calls / 4));
  // Interleaved, so every series sees the same machine noise.
  for (let i = 0; i < calls + warm; i++) {
    same(i);
    let t = performance.now();
    await adbkit.Adb.util.readAll(await direct.shell("echo hi"));
    const b = performance.now() - t;
    // One bare durable commit right before the direct job, as the journal's commit precedes the routed one (its fsync slows what follows it).
    const commit = floor.commit();
    same(i);
    t = performance.now();
    if ((await runJob()).exitCode !== 0) throw new Error("direct job failed");
    const j = performance.now() - t;
    // The same two from a process of their own, the commit before the job as above.
    same(i);
    const ba = await apart.call("echo", serial);
    floor.commit();
    same(i);
    const ja = await apart.call("job", serial);
    same(i);
    const shellId = `${tag}-shell-${i}`;
    let cpu0 = mainThreadCpuMs(pid);
    const own0 = ownCpuMs();
    let m0 = monotonicMs();
    t = performance.now();
    const r = await devices.runShell({ target: { serial }, command: "echo hi" }, { headers: { [TRACE_HEADER]: shellId } });
    const ro = performance.now() - t;
    clientMarks.set(shellId, { start: m0, end: monotonicMs() });
    const routedCpu = mainThreadCpuMs(pid) - cpu0;
    const clientCpu = ownCpuMs() - own0;
    if (r.exitCode !== 0) throw new Error("routed shell failed");
    const readId = `${tag}-read-${i}`;
    cpu0 = mainThreadCpuMs(pid);
    m0 = monotonicMs();
    t = performance.now();
    await devices.getOwnership({ target: { serial } }, { headers: { [TRACE_HEADER]: readId } });
    const rd = performance.now() - t;
    clientMarks.set(readId, { start: m0, end: monotonicMs() });
    const readCpu = mainThreadCpuMs(pid) - cpu0;
    const hop = await floor.unary();
    const rtt = await floor.streamRoundTrip();
    if (i < warm) {
      clientMarks.delete(shellId);
      clientMarks.delete(readId);
      continue;
    }
    s.bare.push(b);
    s.job.push(j);
    s.routed.push(ro);
    s.read.push(rd);
    s.hop.push(hop);
    s.rtt.push(rtt);
    s.commit.push(commit);
    s.bareApart.push(ba);
    s.jobApart.push(ja);
    s.routedCpu.push(routedCpu);
    s.clientCpu.push(clientCpu);
    s.readCpu.push(readCpu);
    wallById.set(shellId, ro);
  }
  return s;
}

/** A stage: the sum of intervals between marks (the client's, the coordinator's, the agent's), and its bare floor if it has one. */
interface Stage {
  name: string;
  parts: [string, string][];
  floor?: "hop" | "rtt" | "commit" | "job";
  /** A part of the stage above it: printed, not added to the sum. */
  part?: true;
  /** Marks only the coordinator's gRPC fast path makes: the median is over the calls that have them (none with --protocol connect). */
  fastPath?: true;
}

const CLIENT_HOP: Stage = { name: "client hop, both ways (call site <-> handler)", parts: [["c.start", "co.in"], ["co.out", "c.end"]], floor: "hop" };
const CLIENT_IN: Stage = { name: "  of which call site -> handler", parts: [["c.start", "co.in"]], part: true };
const CLIENT_OUT: Stage = { name: "  of which handler -> answer read", parts: [["co.out", "c.end"]], part: true };
/** The hop split further at the coordinator's request gate and unary fast path (their stage marks). */
const HOP_PARTS: Stage[] = [
  { name: "    client send, wire, HTTP/2 headers", parts: [["c.start", "co.h2"]], part: true, fastPath: true },
  { name: "    gate: credentials", parts: [["co.h2", "co.admit"]], part: true, fastPath: true },
  { name: "    fast path: handler context", parts: [["co.admit", "co.ctx"]], part: true, fastPath: true },
  { name: "    fast path: read the request", parts: [["co.ctx", "co.read"]], part: true, fastPath: true },
  { name: "    interceptors: access rules, call tracking", parts: [["co.read", "co.in"]], part: true, fastPath: true },
  { name: "    encode and write the answer", parts: [["co.out", "co.end"]], part: true, fastPath: true },
  { name: "    wire, client reads the answer", parts: [["co.end", "c.end"]], part: true, fastPath: true },
];
const COORD_BEFORE: Stage = { name: "coordinator: rules, route, activity entry", parts: [["co.in", "co.send"]] };
const UPLINK: Stage = { name: "uplink, both ways (open stream)", parts: [["co.send", "ag.in"], ["ag.out", "co.result"]], floor: "rtt" };
/** The uplink split at the coordinator's Attach handler (the call leaves its queue for connect's stream; the result arrives from it). */
const UPLINK_PARTS: Stage[] = [
  { name: "  of which coordinator's queue -> its stream", parts: [["co.send", "co.pull"]], part: true },
  { name: "  of which stream, wire -> agent's handler", parts: [["co.pull", "ag.in"]], part: true },
  { name: "  of which back: agent -> coordinator's stream", parts: [["ag.out", "co.recv"]], part: true },
];
const AGENT_IN: Stage = { name: "agent: decode, rules, to the handler", parts: [["ag.in", "ag.handler"]] };
const COORD_AFTER: Stage = { name: "coordinator: decode, activity row, view", parts: [["co.result", "co.out"]] };

/** Both calls alike as far as the agent's handler. */
const TO_AGENT: Stage[] = [
  CLIENT_HOP,
  CLIENT_IN,
  CLIENT_OUT,
  ...HOP_PARTS,
  COORD_BEFORE,
  UPLINK,
  ...UPLINK_PARTS,
  AGENT_IN,
];

const SHELL_STAGES: Stage[] = [
  ...TO_AGENT,
  { name: "agent: device lock", parts: [["ag.handler", "ag.locked"]] },
  { name: "agent: checks, durable pending commit", parts: [["ag.locked", "ag.committed"]], floor: "commit" },
  { name: "device job (adb server, phone, script)", parts: [["ag.committed", "ag.dispatched"]], floor: "job" },
  { name: "agent: settle", parts: [["ag.dispatched", "ag.settled"]] },
  { name: "agent: release, encode the answer", parts: [["ag.settled", "ag.out"]] },
  COORD_AFTER,
];

const READ_STAGES: Stage[] = [
  ...TO_AGENT,
  { name: "agent: ownership status", parts: [["ag.handler", "ag.handled"]] },
  { name: "agent: encode the answer", parts: [["ag.handled", "ag.out"]] },
  COORD_AFTER,
];

/** A mark's process and that process's CPU so far (stage-trace.ts), for stages one process marks at both ends. */
interface CpuMark {
  pid: string;
  cpu: number;
}

/** Every process's marks, by the client's trace id (agent command ids mapped through their links), and their CPU readings. */
function readMarks(dir: string): { times: Map<string, Map<string, number>>; cpu: Map<string, Map<string, CpuMark>> } {
  const raw: (StageMark & { pid: string })[] = [];
  for (const f of readdirSync(dir)) {
    if (!f.startsWith("stage-")) continue;
    const pid = f.slice("stage-".length, -".jsonl".length);
    for (const line of readFileSync(join(dir, f), "utf8").split("\n")) if (line) raw.push({ ...(JSON.parse(line) as StageMark), pid });
  }
  const to = new Map<string, string>();
  for (const m of raw) if (m.stage === "link" && m.to) to.set(m.id, m.to);
  const byCall = new Map<string, Map<string, number>>();
  const cpuByCall = new Map<string, Map<string, CpuMark>>();
  const at = <V>(all: Map<string, Map<string, V>>, id: string) => {
    let c = all.get(id);
    if (!c) all.set(id, c = new Map());
    return c;
  };
  for (const m of raw) {
    if (m.t === undefined) continue;
    const id = to.get(m.id) ?? m.id;
    at(byCall, id).set(m.stage, m.t);
    if (m.cpu !== undefined) at(cpuByCall, id).set(m.stage, { pid: m.pid, cpu: m.cpu });
  }
  for (const [id, c] of clientMarks) {
    at(byCall, id).set("c.start", c.start);
    at(byCall, id).set("c.end", c.end);
  }
  return { times: byCall, cpu: cpuByCall };
}

/** CPU a stage took in the process that marked both ends of each of its parts; undefined if any part spans processes. */
function stageCpu(m: Map<string, CpuMark> | undefined, st: Stage): number | undefined {
  if (!m) return undefined;
  let sum = 0;
  for (const [a, b] of st.parts) {
    const x = m.get(a);
    const y = m.get(b);
    if (!x || !y || x.pid !== y.pid) return undefined;
    sum += y.cpu - x.cpu;
  }
  return sum;
}

interface StageFigure {
  name: string;
  part?: true;
  medianMs: number;
  /** Median CPU of the process that ran the stage (both ends marked by one process), in ms. */
  cpuMs?: number;
  floor?: string;
  floorMs?: number;
}

function stageTable(
  all: { times: Map<string, Map<string, number>>; cpu: Map<string, Map<string, CpuMark>> },
  prefix: string,
  stages: Stage[],
  floors: Record<NonNullable<Stage["floor"]>, number>,
): { calls: number; rows: StageFigure[] } {
  const ids = [...all.times.keys()].filter((id) => id.startsWith(prefix));
  const has = (id: string, st: Stage) => st.parts.every(([a, b]) => all.times.get(id)?.has(a) && all.times.get(id)?.has(b));
  const complete = ids.filter((id) => stages.every((st) => st.fastPath || has(id, st)));
  const took = (id: string, st: Stage) => {
    const m = all.times.get(id) as Map<string, number>;
    return st.parts.reduce((sum, [a, b]) => sum + ((m.get(b) as number) - (m.get(a) as number)), 0);
  };
  const floorNames = { hop: "bare node:http2 unary hop", rtt: "round trip on an open stream", commit: "one durable SQLite commit", job: "the job script sent directly" };
  return {
    calls: complete.length,
    rows: stages.filter((st) => !st.fastPath || complete.some((id) => has(id, st))).map((st) => ({
      name: st.name,
      medianMs: median(complete.filter((id) => has(id, st)).map((id) => took(id, st))),
      ...cpuFigure(complete.filter((id) => has(id, st)).map((id) => stageCpu(all.cpu.get(id), st))),
      ...(st.floor ? { floor: floorNames[st.floor], floorMs: floors[st.floor] } : {}),
      ...(st.part ? { part: true as const } : {}),
    })),
  };
}

/** A slow call: its wall time and the stages that ran longest over their median, largest first. */
interface TailCall {
  wallMs: number;
  over: { name: string; ms: number; medianMs: number }[];
}

/**
 * The slowest calls (the top 1 %, at least 3), stage by stage: which stage
 * the time went to when a call lands in the p99 (the target is the p99).
 */
function stageTail(marks: Map<string, Map<string, number>>, prefix: string, stages: Stage[], rows: StageFigure[]): TailCall[] {
  const whole = stages.filter((st) => !st.part);
  const medianOf = new Map(rows.map((r) => [r.name, r.medianMs]));
  const calls = [...wallById.entries()].filter(([id]) => id.startsWith(prefix) && marks.has(id)).sort((a, b) => b[1] - a[1]);
  return calls.slice(0, Math.max(3, Math.ceil(calls.length / 100))).map(([id, wallMs]) => {
    const m = marks.get(id) as Map<string, number>;
    const over = whole
      .filter((st) => st.parts.every(([a, b]) => m.has(a) && m.has(b)))
      .map((st) => {
        const took = st.parts.reduce((sum, [a, b]) => sum + ((m.get(b) as number) - (m.get(a) as number)), 0);
        return { name: st.name, ms: took, medianMs: medianOf.get(st.name) ?? 0 };
      })
      .filter((x) => x.ms - x.medianMs >= 0.5)
      .sort((a, b) => b.ms - b.medianMs - (a.ms - a.medianMs));
    return { wallMs, over };
  });
}

function printTail(title: string, tail: TailCall[]): void {
  console.log(`  ${title}: the slowest ${tail.length} calls, stages 0.5 ms or more over their median`);
  for (const c of tail) {
    const parts = c.over.map((x) => `${x.name.trim()} ${x.ms.toFixed(2)} (median ${x.medianMs.toFixed(2)})`);
    console.log(`    ${c.wallMs.toFixed(2).padStart(7)} ms: ${parts.length ? parts.join("; ") : "no single stage; spread over all"}`);
  }
}

/** The median CPU of a stage, when every call has it (one process marked both ends). */
function cpuFigure(xs: (number | undefined)[]): { cpuMs?: number } {
  if (xs.length === 0 || xs.some((x) => x === undefined)) return {};
  return { cpuMs: median(xs as number[]) };
}

function printStages(title: string, t: { calls: number; rows: StageFigure[] }): void {
  console.log(`  ${title} (${t.calls} calls, medians; CPU: of the process that ran the stage, all its threads; bare floor of the stage beside it, same rounds)`);
  for (const r of t.rows) {
    const cpu = r.cpuMs !== undefined ? `cpu ${r.cpuMs.toFixed(2).padStart(5)}` : " ".repeat(9);
    console.log(`    ${r.name.padEnd(48)} ${r.medianMs.toFixed(2).padStart(6)} ms  ${cpu}${r.floorMs !== undefined ? `   floor ${r.floorMs.toFixed(2)} ms (${r.floor})` : ""}`);
  }
  console.log(`    ${"sum of stage medians".padEnd(48)} ${t.rows.reduce((a, r) => a + (r.part ? 0 : r.medianMs), 0).toFixed(2).padStart(6)} ms`);
}

async function main(): Promise<void> {
  // Set before the standalone starts: it inherits the environment.
  const traceDir = mkdtempSync(join(tmpdir(), "farm-stage-trace-"));
  process.env["FARM_STAGE_TRACE"] = traceDir;
  const floor = await startBareFloor();
  const lab = await startLab("bench-routing", { logLevel: "info" });
  const apart = await startDirectApart(lab.adb.port);
  let instant: Series;
  let usb: Series;
  let empty: number[];
  try {
    const admin = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
    const health = createClient(Health, farmTransport({ url: String(lab.standalone.ready["url"]), token: admin, protocol }));
    empty = [];
    for (let i = 0; i < 120; i++) {
      const t = performance.now();
      await health.check({});
      empty.push(performance.now() - t);
    }
    instant = await measure(lab, admin, "instant", "ROUTE0001", N, floor, apart, "instant");
    usb = await measure(lab, admin, "pixel-usb", "ROUTE0002", NR, floor, apart, "usb");
  } finally {
    await apart.close();
    await lab.stop();
    await floor.close();
  }
  // The standalone wrote its marks as it exited.
  const marks = readMarks(traceDir);
  rmSync(traceDir, { recursive: true, force: true });
  {
    const mb = median(instant.bare);
    const mr = median(instant.routed);
    const mj = median(instant.job);
    const added = mr - mb;
    const addedP99 = percentile(instant.routed, 99) - percentile(instant.bare, 99);
    const usbRatio = median(usb.routed) / median(usb.bare);
    const floors = { hop: median(instant.hop), rtt: median(instant.rtt), commit: median(instant.commit), job: mj };
    // What a routed journaled shell adds over a bare one at the least: a bare hop, an open-stream round trip, one durable commit, the job script's share.
    const floorAdded = floors.hop + floors.rtt + floors.commit + (mj - mb);
    const addedPass = added <= 3 && added <= 2 * floorAdded;
    const shellStages = stageTable(marks, "instant-shell-", SHELL_STAGES, floors);
    const readStages = stageTable(marks, "instant-read-", READ_STAGES, floors);
    console.log(`routing overhead, ${N} calls on an instant phone and ${NR} on a pixel-usb one (protocol ${protocol})`);
    console.log(`  empty RPC (health)              median ${median(empty.slice(20)).toFixed(2)} ms`);
    console.log(`  direct adbkit shell echo        median ${mb.toFixed(2)} ms, p99 ${percentile(instant.bare, 99).toFixed(2)} ms`);
    console.log(`  routed shell echo (journaled)   median ${mr.toFixed(2)} ms, p99 ${percentile(instant.routed, 99).toFixed(2)} ms  (added median ${added.toFixed(2)} ms, target <= 3; p99 ${addedP99.toFixed(2)} ms, target <= 10)`);
    console.log(`  direct device job (same script) median ${mj.toFixed(2)} ms  (the phone's share; farm's own: ${(mr - mj).toFixed(2)} ms)`);
    console.log(`  routed read (ownership status)  median ${median(instant.read).toFixed(2)} ms`);
    console.log(`  pixel-usb: direct ${median(usb.bare).toFixed(1)} ms, direct job ${median(usb.job).toFixed(1)} ms, routed ${median(usb.routed).toFixed(1)} ms (ratio ${usbRatio.toFixed(2)}), read ${median(usb.read).toFixed(1)} ms`);
    console.log(
      `  bare floors: node:http2 unary hop ${floors.hop.toFixed(2)} ms, open-stream round trip ${floors.rtt.toFixed(2)} ms, durable commit ${floors.commit.toFixed(2)} ms, job script's share ${(mj - mb).toFixed(2)} ms; sum ${
        floorAdded.toFixed(2)
      } ms (routed added ${(added / floorAdded).toFixed(2)}x it, target <= 2x and <= 3 ms)`,
    );
    // The direct calls from a process other than the phone's, as the agent is: the baseline and the job's share measured as the routed call meets them.
    const apart = { bare: median(instant.bareApart), job: median(instant.jobApart) };
    const addedApart = mr - apart.bare;
    const floorApart = floors.hop + floors.rtt + floors.commit + (apart.job - apart.bare);
    console.log(
      `  direct calls from a process of their own (not the phone's): echo ${apart.bare.toFixed(2)} ms, job ${apart.job.toFixed(2)} ms (job's share ${(apart.job - apart.bare).toFixed(2)} ms); routed added ${
        addedApart.toFixed(2)
      } ms over that echo, ${(addedApart / floorApart).toFixed(2)}x the floor sum with that share (${floorApart.toFixed(2)} ms); pixel-usb echo ${median(usb.bareApart).toFixed(1)} ms`,
    );
    printStages("routed shell echo, stage by stage", shellStages);
    printStages("routed read (ownership status), stage by stage", readStages);
    const tail = stageTail(marks.times, "instant-shell-", SHELL_STAGES, shellStages.rows);
    printTail("routed shell echo, tail", tail);
    const cpu = { routed: median(instant.routedCpu), client: median(instant.clientCpu), read: median(instant.readCpu) };
    console.log(
      `  CPU per call (medians; the standalone's main thread): routed shell ${cpu.routed.toFixed(3)} ms, routed read ${cpu.read.toFixed(3)} ms; the bench process (client and simulated phone) during the routed shell ${
        cpu.client.toFixed(3)
      } ms`,
    );
    emitReport(
      "routing-overhead",
      [
        { measure: "routed shell echo, added median", instant: addedMs(added), realistic: round(usbRatio, 2), profile: "pixel-usb", target: `<= +3 ms and <= 2x floor (+${floorAdded.toFixed(2)} ms)`, pass: addedPass },
        { measure: "  bare floor: hop + stream round trip + commit + job share", instant: addedMs(floorAdded), realistic: null, target: "", pass: null },
        { measure: "  routed added / bare floor", instant: `${(added / floorAdded).toFixed(2)}x`, realistic: null, target: "<= 2x", pass: added <= 2 * floorAdded },
        { measure: "  direct calls apart from the phone's process: routed added", instant: addedMs(addedApart), realistic: round(median(usb.routed) / median(usb.bareApart), 2), profile: "pixel-usb", target: "", pass: null },
        { measure: "  direct calls apart: routed added / bare floor", instant: `${(addedApart / floorApart).toFixed(2)}x`, realistic: null, target: "", pass: null },
        { measure: "routed shell echo, added p99", instant: addedMs(addedP99), realistic: null, target: "<= +10 ms", pass: addedP99 <= 10 },
        { measure: "  of which the phone's job script", instant: addedMs(mj - mb), realistic: round(median(usb.job) / median(usb.bare), 2), profile: "pixel-usb", target: "", pass: null },
        { measure: "routed read (ownership status)", instant: ms(median(instant.read)), realistic: round(median(usb.read) / median(usb.bare), 2), profile: "pixel-usb", target: "<= the routed shell", pass: median(instant.read) <= mr },
        ...shellStages.rows.map((r) => ({
          measure: `  shell stage: ${r.name}`,
          instant: ms(r.medianMs),
          realistic: null,
          target: [r.cpuMs !== undefined ? `cpu ${ms(r.cpuMs)}` : "", r.floorMs !== undefined ? `floor ${ms(r.floorMs)}` : ""].filter(Boolean).join(", "),
          pass: null,
        })),
        { measure: "routed shell echo, standalone's CPU per call (main thread)", instant: ms(cpu.routed, 3), realistic: null, target: "", pass: null },
        { measure: "routed read, standalone's CPU per call (main thread)", instant: ms(cpu.read, 3), realistic: null, target: "", pass: null },
        { measure: "empty RPC (health)", instant: ms(median(empty.slice(20))), realistic: null, target: "", pass: null },
      ],
      {
        protocol,
        instant: { directMedianMs: round(mb, 2), routedMedianMs: round(mr, 2), directJobMedianMs: round(mj, 2), routedReadMedianMs: round(median(instant.read), 2) },
        apart: { directMedianMs: round(apart.bare, 2), directJobMedianMs: round(apart.job, 2), addedMs: round(addedApart, 2), floorSumMs: round(floorApart, 3) },
        floors: { hopMs: round(floors.hop, 3), streamRoundTripMs: round(floors.rtt, 3), commitMs: round(floors.commit, 3), jobShareMs: round(mj - mb, 3), sumMs: round(floorAdded, 3) },
        stages: { shell: shellStages, read: readStages },
        tail,
        cpuPerCallMs: { routedShell: round(cpu.routed, 3), routedRead: round(cpu.read, 3), benchProcessDuringShell: round(cpu.client, 3) },
        pixelUsb: { directMedianMs: round(median(usb.bare), 2), routedMedianMs: round(median(usb.routed), 2), directJobMedianMs: round(median(usb.job), 2), routedReadMedianMs: round(median(usb.read), 2) },
      },
    );
  }
}

await main();
process.exit(0);
