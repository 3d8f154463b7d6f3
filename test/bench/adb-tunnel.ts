/**
 * Remote adb through `farm adb connect` against the same simulated phone
 * reached directly through the lab's adb server, in the same run:
 *  - `adb push` of --mib MiB: throughput through the tunnel / direct
 *    (target >= 0.5);
 *  - `adb pull` of it back, the same way (and the bytes checked);
 *  - `adb shell echo` round trip, --rounds times: the tunnel's added median
 *    (target <= 5 ms on loopback);
 *  - the same push and shell through a floor: as many plain Node processes
 *    forwarding TCP (tcp-relay-chain.ts) as the tunnel has farm processes,
 *    interleaved, so the tunnel's cost shows against moving the bytes alone;
 *  - the CLI tunnel process's peak RSS.
 * Twice: with `farm coordinator` and `farm agent` as separate processes, as
 * a lab deploys them (the targets are for this), and with `farm standalone`,
 * where one process does both hops.
 *
 * With --stages, every farm process on the path marks each `adb shell echo`
 * stream's steps (shared/src/stage-trace.ts) and a table of when each step
 * happens, as the median time after the adb client started, is printed.
 *
 *   node test/dist/bench/adb-tunnel.js [--mib 100] [--pushes 3] [--rounds 30] [--topology split|standalone|both] [--stages]
 */
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { adbConnect, runAdb, SimDevice, startAdbServer } from "../devsim/index.js";
import { farm, farmBin, waitFor } from "../support/farm-process.js";
import { startLab } from "../support/lab.js";
import { startSplitFarm } from "../support/split-farm.js";
import { startRelayChain } from "./tcp-relay-chain.js";
import { cpuSeconds, median, memoryMiB } from "./proc-stats.js";
import { emitReport } from "./bench-report.js";
import { monotonicMs } from "@farm/shared/stage-trace";

const { values } = parseArgs({
  options: { mib: { type: "string", default: "100" }, pushes: { type: "string", default: "3" }, rounds: { type: "string", default: "30" }, topology: { type: "string", default: "both" }, stages: { type: "boolean", default: false } },
});
const MIB = Number(values.mib);
const ROUNDS = Number(values.rounds);
const PUSHES = Number(values.pushes);
// Set before any farm process starts (and before stage-trace.ts loads here): every process on the path marks.
const traceDir = values.stages ? mkdtempSync(join(tmpdir(), "farm-adb-stages-")) : undefined;
if (traceDir) process.env["FARM_STAGE_TRACE"] = traceDir;
/** This process's own marks (the adb client's start and exit), on the services' clock. */
const clientMarks: { stage: string; t: number }[] = [];
const mark = (stage: string) => {
  if (traceDir) clientMarks.push({ stage, t: monotonicMs() });
};

/** An `adb shell echo` stream's steps in the order they happen in one round (bytes flow while later steps open). */
const SHELL_STEPS = [
  "client.start",
  "cli.open",
  "coord.start",
  "coord.ask-agent",
  "agent.start",
  "agent.service-okay",
  "coord.joined",
  "coord.opened",
  "cli.opened",
  "agent.device-data",
  "coord.to-caller",
  "cli.first-wrte",
  "agent.device-end",
  "coord.device-end",
  "cli.stream-end",
  "cli.clse",
  "client.exit",
];

const signed = (ms: number) => `${ms >= 0 ? "+" : ""}${ms.toFixed(1)}`;
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

async function timed(fn: () => Promise<{ code: number; stderr: string }>): Promise<number> {
  const t = performance.now();
  const r = await fn();
  if (r.code !== 0) throw new Error(`adb failed: ${r.stderr}`);
  return performance.now() - t;
}

/** A farm with one simulated phone: where CLI calls go, the lab's adb server, the phone's serial there. */
interface BenchFarm {
  env: NodeJS.ProcessEnv;
  /** The farm's processes on the tunnel's path, by role (one "standalone", or "coordinator" and "agent"). */
  pids: Record<string, number>;
  adbPort: number;
  serial: string;
  dir: string;
  stop(): Promise<void>;
}

async function standaloneFarm(): Promise<BenchFarm> {
  const lab = await startLab("bench-adb-tunnel");
  const { serial } = await lab.addDevice({ serialno: "RBENCHADB" });
  return { env: lab.env, pids: { standalone: lab.standalone.pid }, adbPort: lab.adb.port, serial, dir: lab.dir.path, stop: () => lab.stop() };
}

async function splitFarm(): Promise<BenchFarm> {
  const lab = await startSplitFarm("bench-adb-tunnel-split");
  const phone = new SimDevice({ serialno: "RBENCHADB" });
  const serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
  await waitFor(`${serial} in farm devices`, async () => {
    const list = ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string; properties: { physicalId: string } }[];
    return list.some((d) => d.serial === serial && d.state === "device" && d.properties.physicalId) ? true : undefined;
  });
  return {
    env: lab.env,
    pids: { coordinator: lab.coordinator.pid, agent: lab.agent.pid },
    adbPort: lab.adb.port,
    serial,
    dir: lab.dir.path,
    async stop() {
      await lab.stop();
      await phone.close();
    },
  };
}

async function run(topology: "split" | "standalone"): Promise<void> {
  const lab = topology === "split" ? await splitFarm() : await standaloneFarm();
  const user = await startAdbServer();
  const chain = await startRelayChain(Number(lab.serial.split(":").pop()), topology === "split" ? 3 : 2);
  try {
    const serial = lab.serial;
    const acquired = await farm(["lease", "acquire", "--device", serial, "--ttl", "30m"], lab.env);
    const token = (acquired.json["lease"] as { token: string }).token;
    const env = { ...process.env, ...lab.env, FARM_LEASE: token, FARM_DEVICE: serial, ANDROID_ADB_SERVER_PORT: String(user.port) };
    // FARM_PROFILE_DIR: the tunnel process writes a V8 CPU profile there too, as the services do (docs/performance.md).
    const profile = process.env["FARM_PROFILE_DIR"] ? ["--cpu-prof", `--cpu-prof-dir=${process.env["FARM_PROFILE_DIR"]}`] : [];
    const proc = spawn(process.execPath, [...profile, farmBin, "adb", "connect", "--foreground", "-o", "json"], { env, stdio: ["ignore", "pipe", "inherit"] });
    const first = await new Promise<string>((resolve) => createInterface({ input: proc.stdout }).once("line", resolve));
    const local = String((JSON.parse(first) as { serial: string }).serial);
    try {
      const file = join(lab.dir, "push.bin");
      await writeFile(file, randomBytes(MIB * 1024 * 1024));
      const direct = (args: string[]) => runAdb(lab.adbPort, ["-s", serial, ...args], { timeoutMs: 600_000 });
      const tunnel = (args: string[]) => runAdb(user.port, ["-s", local, ...args], { timeoutMs: 600_000 });
      // The floor: the same phone through as many plain Node processes forwarding TCP as the tunnel has farm processes.
      const floorSerial = await adbConnect(user.port, "127.0.0.1", chain.port);
      const floor = (args: string[]) => runAdb(user.port, ["-s", floorSerial, ...args], { timeoutMs: 600_000 });
      // Warm every path once.
      await direct(["shell", "true"]);
      await floor(["shell", "true"]);
      await tunnel(["shell", "true"]);
      // Interleaved (direct, tunnel, direct, ...): the machine's load moves both alike.
      const pushesDirect: number[] = [];
      const pushesFloor: number[] = [];
      const pushesTunnel: number[] = [];
      // CPU each process on the tunnel's path spends per MiB pushed through it: on a machine whose
      // cores are busy (a lab host, this one) that, more than any window, is what sets the speed.
      const pids = { cli: proc.pid as number, ...lab.pids };
      const cpu: Record<string, number> = Object.fromEntries(Object.keys(pids).map((k) => [k, 0]));
      for (let i = 0; i < PUSHES; i++) {
        pushesDirect.push(await timed(() => direct(["push", file, "/sdcard/direct.bin"])));
        pushesFloor.push(await timed(() => floor(["push", file, "/sdcard/floor.bin"])));
        const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
        pushesTunnel.push(await timed(() => tunnel(["push", file, "/sdcard/tunnel.bin"])));
        for (const [k, pid] of Object.entries(pids)) cpu[k] = (cpu[k] ?? 0) + cpuSeconds(pid) - (before[k] ?? 0);
      }
      const cpuMsPerMiB = Object.fromEntries(Object.entries(cpu).map(([k, s]) => [k, (s * 1000) / (MIB * PUSHES)]));
      // Pulls the same way: the device's bytes take the other direction through every hop.
      const pullsDirect: number[] = [];
      const pullsFloor: number[] = [];
      const pullsTunnel: number[] = [];
      const back = join(lab.dir, "back.bin");
      const pullCpu: Record<string, number> = Object.fromEntries(Object.keys(pids).map((k) => [k, 0]));
      for (let i = 0; i < PUSHES; i++) {
        pullsDirect.push(await timed(() => direct(["pull", "/sdcard/direct.bin", join(lab.dir, "direct-back.bin")])));
        pullsFloor.push(await timed(() => floor(["pull", "/sdcard/floor.bin", join(lab.dir, "floor-back.bin")])));
        const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
        pullsTunnel.push(await timed(() => tunnel(["pull", "/sdcard/tunnel.bin", back])));
        for (const [k, pid] of Object.entries(pids)) pullCpu[k] = (pullCpu[k] ?? 0) + cpuSeconds(pid) - (before[k] ?? 0);
      }
      const pullCpuMsPerMiB = Object.fromEntries(Object.entries(pullCpu).map(([k, s]) => [k, (s * 1000) / (MIB * PUSHES)]));
      // Every byte pushed through the tunnel came back through it unchanged.
      if (sha256(await readFile(back)) !== sha256(await readFile(file))) throw new Error("the pushed file came back different");
      const pushDirect = median(pushesDirect);
      const pushTunnel = median(pushesTunnel);
      const echoDirect: number[] = [];
      const echoFloor: number[] = [];
      const echoTunnel: number[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        echoDirect.push(await timed(() => direct(["shell", "echo", "x"])));
        echoFloor.push(await timed(() => floor(["shell", "echo", "x"])));
        mark("client.start");
        echoTunnel.push(await timed(() => tunnel(["shell", "echo", "x"])));
        mark("client.exit");
      }
      const mibs = (ms: number) => MIB / (ms / 1000);
      const rss = memoryMiB(proc.pid as number);
      console.log(`remote adb (farm adb connect, ${topology === "split" ? "coordinator and agent processes" : "farm standalone"}) against the same phone directly, ${MIB} MiB push, ${ROUNDS} shell round trips`);
      console.log(`adb push           direct ${mibs(pushDirect).toFixed(1).padStart(7)} MiB/s   tunnel ${mibs(pushTunnel).toFixed(1).padStart(7)} MiB/s   tunnel/direct ${(pushDirect / pushTunnel).toFixed(2)} (target >= 0.5)`);
      console.log(
        `adb shell echo     direct ${median(echoDirect).toFixed(1).padStart(7)} ms      tunnel ${median(echoTunnel).toFixed(1).padStart(7)} ms      added median ${(median(echoTunnel) - median(echoDirect)).toFixed(1)} ms (target <= 5 ms)`,
      );
      const hops = topology === "split" ? 3 : 2;
      console.log(
        `floor (${hops} Node TCP relays)   push ${(pushDirect / median(pushesFloor)).toFixed(2)} of direct, shell echo added median ${signed(median(echoFloor) - median(echoDirect))} ms: the tunnel is ${
          (median(pushesFloor) / pushTunnel).toFixed(2)
        } of the floor's push, ${signed(median(echoTunnel) - median(echoFloor))} ms over its shell`,
      );
      console.log(
        `adb pull           direct ${mibs(median(pullsDirect)).toFixed(1).padStart(7)} MiB/s   tunnel ${mibs(median(pullsTunnel)).toFixed(1).padStart(7)} MiB/s   tunnel/direct ${(median(pullsDirect) / median(pullsTunnel)).toFixed(2)}`,
      );
      console.log(
        `floor (${hops} Node TCP relays)   pull ${(median(pullsDirect) / median(pullsFloor)).toFixed(2)} of direct: the tunnel is ${(median(pullsFloor) / median(pullsTunnel)).toFixed(2)} of the floor's pull`,
      );
      console.log(`CPU per MiB pulled ${Object.entries(pullCpuMsPerMiB).map(([k, ms]) => `${k} ${ms.toFixed(1)} ms`).join(", ")}`);
      console.log(`CPU per MiB pushed ${Object.entries(cpuMsPerMiB).map(([k, ms]) => `${k} ${ms.toFixed(1)} ms`).join(", ")}`);
      console.log(`tunnel process     RSS ${rss.rss.toFixed(1)} MiB, peak ${rss.peakRss.toFixed(1)} MiB`);
      results.push({
        topology,
        pushRatio: pushDirect / pushTunnel,
        echoAddedMs: median(echoTunnel) - median(echoDirect),
        tunnelPeakRssMiB: rss.peakRss,
        cpuMsPerMiB,
        pullRatio: median(pullsDirect) / median(pullsTunnel),
        pullCpuMsPerMiB,
        floorPushRatio: pushDirect / median(pushesFloor),
        floorPullRatio: median(pullsDirect) / median(pullsFloor),
        floorEchoAddedMs: median(echoFloor) - median(echoDirect),
      });
    } finally {
      proc.kill("SIGTERM");
      await new Promise((r) => proc.once("exit", r));
      await farm(["lease", "release"], { ...lab.env, FARM_LEASE: token });
    }
  } finally {
    await user.stop();
    await chain.stop();
    await lab.stop();
  }
}

const results: {
  topology: string;
  pushRatio: number;
  echoAddedMs: number;
  tunnelPeakRssMiB: number;
  cpuMsPerMiB: Record<string, number>;
  pullRatio: number;
  pullCpuMsPerMiB: Record<string, number>;
  floorPushRatio: number;
  floorPullRatio: number;
  floorEchoAddedMs: number;
}[] = [];
for (const topology of values.topology === "both" ? (["split", "standalone"] as const) : [values.topology === "standalone" ? "standalone" : "split"] as const) await run(topology);
if (traceDir) {
  printStages(traceDir);
  if (!process.env["FARM_KEEP_STAGES"]) rmSync(traceDir, { recursive: true, force: true });
}

/**
 * The tunnel's shell rounds step by step: each round is the marks from one
 * client.start to the next (rounds run one at a time). For each step of
 * SHELL_STEPS, the median over the rounds that have every step of the time
 * since the step before it (a round whose output reached the agent before
 * the CLI heard "opened" shows a negative step there). Written by each
 * process as it exits, so read after the farm has stopped.
 */
function printStages(dir: string): void {
  const marks = [...clientMarks];
  for (const f of readdirSync(dir).filter((n) => n.startsWith("stage-"))) {
    for (const line of readFileSync(join(dir, f), "utf8").split("\n")) {
      if (!line) continue;
      const m = JSON.parse(line) as { id: string; stage: string; t?: number };
      // The services mark a stream by its service kind ("adb:shell,v2,TERM=xterm,raw:").
      if (m.id.startsWith("adb:shell,") && m.t !== undefined) marks.push({ stage: m.stage, t: m.t });
    }
  }
  marks.sort((a, b) => a.t - b.t);
  const rounds: Map<string, number>[] = [];
  for (const m of marks) {
    if (m.stage === "client.start") rounds.push(new Map());
    const round = rounds.at(-1);
    if (round && !round.has(m.stage)) round.set(m.stage, m.t);
  }
  const whole = rounds.filter((r) => SHELL_STEPS.every((s) => r.has(s)));
  console.log(`adb shell echo through the tunnel, step by step (median ms over ${whole.length} of ${rounds.length} rounds with every step):`);
  for (let i = 1; i < SHELL_STEPS.length; i++) {
    const [from, to] = [SHELL_STEPS[i - 1] as string, SHELL_STEPS[i] as string];
    const step = median(whole.map((r) => (r.get(to) as number) - (r.get(from) as number)));
    console.log(`  ${from.padEnd(20)} -> ${to.padEnd(20)} ${step.toFixed(2).padStart(8)}`);
  }
  console.log(`  whole round (client.start -> client.exit) ${median(whole.map((r) => (r.get("client.exit") as number) - (r.get("client.start") as number))).toFixed(2)}`);
}
