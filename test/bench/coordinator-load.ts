/**
 * Coordinator load: many lightweight simulated agents (gRPC clients only, no
 * adb; agent-swarm.ts, a process of their own) attach to a real coordinator
 * process, each reporting devices and heartbeating at a real agent's default
 * interval; this process only measures. The floors beside them: the same
 * agents against a bare connect-node server and a bare node:http2 one
 * (attach-floor-server.ts). Prints the coordinator's CPU as a fraction of
 * one core, the ListDevices latency over all devices, and peak RSS, each as a
 * ratio to its target and to a baseline measured in the same run. The
 * coordinator runs with the Node options its systemd unit ships.
 *
 *   node test/dist/bench/coordinator-load.js [--agents 1000] [--devices 10] [--heartbeat-ms 5000] [--window-s 30]
 *     [--floors connect-node,bare|none] [--coordinator-node-options=--max-semi-space-size=N]
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ListDevicesResponseSchema, RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { TokenKind, TokenService } from "@farm/shared/gen/farm/v1/token_service_pb";
import { farmTransport } from "@farm/shared/farm-transport";
import { decodeAnswer } from "@farm/shared/answer-decode";
import { Health } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { startFarm } from "../support/farm-process.js";
import { bearer } from "../support/fake-agent.js";
import { makeTempDir } from "../support/temp-dir.js";
import { emitReport } from "./bench-report.js";
import { cpuOver, cpuSeconds, median, memoryMiB, percentile } from "./proc-stats.js";

const { values } = parseArgs({
  options: {
    agents: { type: "string", default: "1000" },
    devices: { type: "string", default: "10" },
    "heartbeat-ms": { type: "string", default: "5000" },
    "window-s": { type: "string", default: "30" },
    // Node options for the coordinator process alone (NODE_OPTIONS), for measuring V8 settings; by default those the
    // systemd unit ships (deploy/systemd/farm-coordinator.service), "" for Node's own defaults.
    "coordinator-node-options": { type: "string" },
    // Which floors to measure after the coordinator: connect-node, bare (node:http2 alone), or none.
    floors: { type: "string", default: "connect-node,bare" },
  },
});
const AGENTS = Number(values.agents);
const DEVICES = Number(values.devices);
const HEARTBEAT_MS = Number(values["heartbeat-ms"]);
const WINDOW_S = Number(values["window-s"]);
const IDLE_S = 5;
/** Issue 38's targets. */
const CPU_TARGET = 0.05;
const LIST_TARGET_MS = 100;
const RSS_TARGET_MIB = 150;
const LIST_ROUNDS = 20;
/** The coordinator's Node options as installed: the systemd unit's NODE_OPTIONS (the container's entry point passes the same flags). */
async function shippedNodeOptions(): Promise<string> {
  const unit = await readFile(fileURLToPath(new URL("../../../deploy/systemd/farm-coordinator.service", import.meta.url)), "utf8");
  return /^Environment=NODE_OPTIONS=(.*)$/m.exec(unit)?.[1]?.trim() ?? "";
}
const COORDINATOR_NODE_OPTIONS = values["coordinator-node-options"] ?? (await shippedNodeOptions());
const FLOORS = values.floors === "none" ? [] : (values.floors ?? "").split(",");
for (const f of FLOORS) if (f !== "connect-node" && f !== "bare") throw new Error(`--floors lists connect-node, bare or none, got ${f}`);

async function timeCalls(n: number, call: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await call();
    out.push(performance.now() - t0);
  }
  return out;
}

/** A helper process of this bench (agent-swarm.js, attach-floor-server.js), once it printed its ready line. */
async function startChild(script: string, args: string[]): Promise<{ proc: ChildProcess; ready: Record<string, unknown> }> {
  const proc = spawn(process.execPath, [fileURLToPath(new URL(script, import.meta.url)), ...args], { stdio: ["pipe", "pipe", "inherit"] });
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    createInterface({ input: proc.stdout as NodeJS.ReadableStream }).once("line", (line) => resolve(JSON.parse(line) as Record<string, unknown>));
    proc.once("exit", (code) => reject(new Error(`${script} exited with ${code} before it was ready`)));
  });
  return { proc, ready };
}

/** Its stdin closing ends a helper process; killed if it lingers. */
async function endChild(proc: ChildProcess | undefined): Promise<void> {
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((r) => proc.once("exit", r));
  proc.stdin?.end();
  const t = setTimeout(() => proc.kill("SIGKILL"), 5_000);
  await exited;
  clearTimeout(t);
}

async function main(): Promise<void> {
  const dir = await makeTempDir("bench");
  const coord = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", join(dir.path, "data")], {
    FARM_LOG_LEVEL: "warn",
    ...(COORDINATOR_NODE_OPTIONS ? { NODE_OPTIONS: COORDINATOR_NODE_OPTIONS } : {}),
  });
  let swarm: ChildProcess | undefined;
  let floor: ChildProcess | undefined;
  try {
    const url = coord.ready["url"] as string;
    const admin = (await readFile(coord.ready["adminTokenFile"] as string, "utf8")).trim();
    const userTransport = createGrpcTransport({ baseUrl: url, interceptors: [bearer(admin)] });
    const registry = createClient(RegistryService, userTransport);
    const health = createClient(Health, userTransport);
    const farmRegistry = createClient(RegistryService, farmTransport({ url, token: admin }));
    // The same client, saying it takes no compressed answer: the coordinator then sends the pages as they are.
    const noGzip: Interceptor = (next) => (req) => {
      req.header.delete("grpc-accept-encoding");
      return next(req);
    };
    const plainRegistry = createClient(RegistryService, farmTransport({ url, token: admin, interceptors: [noGzip] }));
    // An agent token is one agent: each fake agent gets its own.
    const tokenService = createClient(TokenService, userTransport);
    const agentToken = async (i: number) => (await tokenService.createToken({ name: `bench-${i}`, kind: TokenKind.AGENT })).token;

    // Baselines in this run: an empty RPC, and the idle process (once start-up's work is done).
    await timeCalls(50, () => health.check({}));
    const baselineRpc = median(await timeCalls(200, () => health.check({})));
    await new Promise((r) => setTimeout(r, 2_000));
    const idleMem = memoryMiB(coord.pid);
    const idle = await cpuOver(coord.pid, IDLE_S * 1000);

    // The agents, in a process of their own: one token each (an agent token is one agent).
    const tokens: string[] = [];
    for (let i = 0; i < AGENTS; i += 50) tokens.push(...(await Promise.all(Array.from({ length: Math.min(50, AGENTS - i) }, (_, k) => agentToken(i + k)))));
    const tokenFile = join(dir.path, "agent-tokens");
    await writeFile(tokenFile, tokens.join("\n"), { mode: 0o600 });
    const attachT0 = performance.now();
    const swarmArgs = (target: string) => ["--url", target, "--tokens", tokenFile, "--agents", String(AGENTS), "--devices", String(DEVICES), "--heartbeat-ms", String(HEARTBEAT_MS)];
    swarm = (await startChild("./agent-swarm.js", swarmArgs(url))).proc;
    const swarmPid = swarm.pid as number;
    // Every device, in pages of the largest size the API serves.
    const allDevices = async (client: Client<typeof RegistryService>, opts: { onHeader?: (h: Headers) => void } = {}) => {
      const devices = [];
      let pageToken = "";
      do {
        const page = await client.listDevices({ pageSize: 1000, pageToken }, opts);
        devices.push(...page.devices);
        pageToken = page.nextPageToken;
      } while (pageToken !== "");
      return devices;
    };
    for (;;) {
      const n = (await allDevices(registry)).length;
      if (n >= AGENTS * DEVICES) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const attachS = (performance.now() - attachT0) / 1000;
    const attachedMem = memoryMiB(coord.pid);

    // Steady state: heartbeats only.
    const swarmCpu0 = cpuSeconds(swarmPid);
    const load = await cpuOver(coord.pid, WINDOW_S * 1000);
    const swarmCpu = (cpuSeconds(swarmPid) - swarmCpu0) / WINDOW_S;
    const loadCpu = load.user + load.system;
    const steadyMem = memoryMiB(coord.pid);

    // The whole list as `farm devices --all` reads it: farm's client (farmTransport, as the CLI makes it), every page.
    // Interleaved with the same pages through a client that does not accept gzip, so the split below is from the same moments.
    const serverMs: number[] = [];
    const list: number[] = [];
    const plain: number[] = [];
    // CPU per whole listing, this (client) process and the coordinator: steadier than wall time on a loaded machine.
    let clientCpuMs = 0;
    let coordCpuS = 0;
    for (let i = 0; i < LIST_ROUNDS + 3; i++) {
      let total = 0;
      const c0 = process.cpuUsage();
      const s0 = cpuSeconds(coord.pid);
      const t0 = performance.now();
      await allDevices(farmRegistry, {
        onHeader: (h) => {
          const dur = /dur=([\d.]+)/.exec(h.get("server-timing") ?? "")?.[1];
          if (dur) total += Number(dur);
        },
      });
      const t1 = performance.now();
      const c = process.cpuUsage(c0);
      const s1 = cpuSeconds(coord.pid);
      await allDevices(plainRegistry);
      const t2 = performance.now();
      // The first rounds warm both clients up.
      if (i < 3) continue;
      list.push(t1 - t0);
      plain.push(t2 - t1);
      serverMs.push(total);
      clientCpuMs += (c.user + c.system) / 1000;
      coordCpuS += s1 - s0;
    }
    const listClientCpuMs = clientCpuMs / LIST_ROUNDS;
    const listCoordCpuMs = (coordCpuS * 1000) / LIST_ROUNDS;
    const listMedian = median(list);
    const plainMedian = median(plain);
    const serverMedian = median(serverMs);
    // One page's bytes, and the client's decode of them.
    const pageRes = await registry.listDevices({ pageSize: 1000 });
    const body = toBinary(ListDevicesResponseSchema, pageRes);
    // farm's client reads pages with its own decoder (answer-decode.ts); protobuf-es's beside it, interleaved.
    const decodeOwn: number[] = [];
    const decodePbes: number[] = [];
    for (let i = 0; i < 20; i++) {
      decodeOwn.push(...(await timeCalls(1, async () => decodeAnswer(ListDevicesResponseSchema, body))));
      decodePbes.push(...(await timeCalls(1, async () => fromBinary(ListDevicesResponseSchema, body))));
    }
    const decodeMedian = median(decodeOwn);
    const decodePbesMedian = median(decodePbes);
    // Every page: the default page is 100 agents.
    let agentsOnline = 0;
    let agentPage = "";
    do {
      const page = await registry.listAgents({ pageSize: 1000, pageToken: agentPage });
      agentsOnline += page.agents.filter((a) => a.online).length;
      agentPage = page.nextPageToken;
    } while (agentPage !== "");
    const mem = memoryMiB(coord.pid);

    const swarmMem = memoryMiB(swarmPid);
    await endChild(swarm);

    // The floors: the same agents against a server that only reads their streams (attach-floor-server.ts), connect-node's and bare node:http2.
    const floors: Record<string, { cpu: number; user: number; system: number; idleRss: number; peakRss: number }> = {};
    for (const kind of FLOORS) {
      const floorServer = await startChild("./attach-floor-server.js", ["--kind", kind]);
      floor = floorServer.proc;
      const floorPid = floor.pid as number;
      await new Promise((r) => setTimeout(r, 1_000));
      const floorIdleMem = memoryMiB(floorPid);
      swarm = (await startChild("./agent-swarm.js", swarmArgs(floorServer.ready["url"] as string))).proc;
      // As for the coordinator: the window starts once the streams are up.
      await new Promise((r) => setTimeout(r, 2_000));
      const floorLoad = await cpuOver(floorPid, WINDOW_S * 1000);
      const floorMem = memoryMiB(floorPid);
      floors[kind] = { cpu: floorLoad.user + floorLoad.system, user: floorLoad.user, system: floorLoad.system, idleRss: floorIdleMem.rss, peakRss: floorMem.peakRss };
      await endChild(swarm);
      await endChild(floor);
    }
    const cn = floors["connect-node"];
    const bare = floors["bare"];
    const heartbeatsPerS = (AGENTS * 1000) / HEARTBEAT_MS;
    // CPU the heartbeats cost, per heartbeat, above the idle process.
    const perBeatUs = ((loadCpu - idle.user - idle.system) / heartbeatsPerS) * 1e6;

    const r = (x: number) => x.toFixed(3);
    const floorText = (show: (f: { cpu: number; peakRss: number }) => string) => `${cn ? `bare connect-node ${show(cn)}; ` : ""}${bare ? `bare node:http2 ${show(bare)}; ` : ""}`;
    const pct = (x: number) => `${(x * 100).toFixed(2)}%`;
    const report = {
      agents: AGENTS,
      devicesPerAgent: DEVICES,
      heartbeatMs: HEARTBEAT_MS,
      agentsOnline,
      attachSeconds: Number(attachS.toFixed(2)),
      coordinatorCpuCores: Number(r(loadCpu)),
      coordinatorUserCores: Number(r(load.user)),
      coordinatorSystemCores: Number(r(load.system)),
      idleCpuCores: Number(r(idle.user + idle.system)),
      cpuPerHeartbeatUs: Math.round(perBeatUs),
      swarmCpuCores: Number(r(swarmCpu)),
      cpuRatioToTarget: Number(r(loadCpu / CPU_TARGET)),
      listDevicesMedianMs: Number(listMedian.toFixed(2)),
      listDevicesP90Ms: Number(percentile(list, 90).toFixed(2)),
      listDevicesServerMedianMs: Number(serverMedian.toFixed(2)),
      listDevicesNoGzipMedianMs: Number(plainMedian.toFixed(2)),
      listDevicesDecodeMedianMs: Number(decodeMedian.toFixed(2)),
      listDevicesDecodeProtobufEsMedianMs: Number(decodePbesMedian.toFixed(2)),
      listDevicesClientCpuMs: Number(listClientCpuMs.toFixed(1)),
      listDevicesCoordinatorCpuMs: Number(listCoordCpuMs.toFixed(1)),
      responseBytes: body.length,
      baselineEmptyRpcMs: Number(baselineRpc.toFixed(2)),
      listDevicesRatioToEmptyRpc: Number(r(listMedian / baselineRpc)),
      listDevicesRatioToTarget: Number(r(listMedian / LIST_TARGET_MS)),
      peakRssMiB: Number(mem.peakRss.toFixed(1)),
      idleRssMiB: Number(idleMem.rss.toFixed(1)),
      peakRssAfterAttachMiB: Number(attachedMem.peakRss.toFixed(1)),
      rssSteadyMiB: Number(steadyMem.rss.toFixed(1)),
      peakRssRatioToIdle: Number(r(mem.peakRss / idleMem.rss)),
      swarmPeakRssMiB: Number(swarmMem.peakRss.toFixed(1)),
      coordinatorNodeOptions: COORDINATOR_NODE_OPTIONS,
      floorCpuCores: cn ? Number(r(cn.cpu)) : null,
      floorUserCores: cn ? Number(r(cn.user)) : null,
      floorSystemCores: cn ? Number(r(cn.system)) : null,
      cpuRatioToFloor: cn ? Number(r(loadCpu / cn.cpu)) : null,
      floorIdleRssMiB: cn ? Number(cn.idleRss.toFixed(1)) : null,
      floorPeakRssMiB: cn ? Number(cn.peakRss.toFixed(1)) : null,
      bareFloorCpuCores: bare ? Number(r(bare.cpu)) : null,
      bareFloorIdleRssMiB: bare ? Number(bare.idleRss.toFixed(1)) : null,
      bareFloorPeakRssMiB: bare ? Number(bare.peakRss.toFixed(1)) : null,
    };
    console.log(`coordinator load: ${AGENTS} agents x ${DEVICES} devices, heartbeat ${HEARTBEAT_MS} ms (${heartbeatsPerS.toFixed(0)}/s), window ${WINDOW_S} s; the agents in another process`);
    console.log(`  agents online          ${agentsOnline}/${AGENTS} (attached in ${attachS.toFixed(1)} s)`);
    console.log(
      `  coordinator CPU        ${pct(loadCpu)} of one core (user ${pct(load.user)}, system ${pct(load.system)}; idle ${pct(idle.user + idle.system)}; ${perBeatUs.toFixed(0)} us a heartbeat; ratio to the ${pct(CPU_TARGET)} target ${
        r(loadCpu / CPU_TARGET)
      }); the agents' process ${pct(swarmCpu)}`,
    );
    console.log(`  coordinator's Node     NODE_OPTIONS=${COORDINATOR_NODE_OPTIONS || "(none: Node's defaults)"}`);
    for (const [kind, f] of Object.entries(floors)) {
      console.log(
        `  floor, ${kind.padEnd(15)}a server reading the same streams: ${pct(f.cpu)} of one core (user ${pct(f.user)}, system ${pct(f.system)}; coordinator ${r(loadCpu / f.cpu)}x), peak RSS ${f.peakRss.toFixed(0)} MiB (idle ${
          f.idleRss.toFixed(0)
        } MiB)`,
      );
    }
    console.log(
      `  ListDevices (${AGENTS * DEVICES})  median ${listMedian.toFixed(1)} ms, p90 ${percentile(list, 90).toFixed(1)} (ratio to the ${LIST_TARGET_MS} ms target ${r(listMedian / LIST_TARGET_MS)}; empty RPC ${baselineRpc.toFixed(2)} ms: ${
        r(listMedian / baselineRpc)
      }x)`,
    );
    console.log(
      `  ListDevices split      registry ${serverMedian.toFixed(1)} ms over its ${Math.ceil((AGENTS * DEVICES) / 1000)} pages; the same pages not gzipped ${plainMedian.toFixed(1)} ms; client decode of one page (${
        (body.length / 1048576).toFixed(2)
      } MiB) ${decodeMedian.toFixed(1)} ms (protobuf-es's fromBinary ${decodePbesMedian.toFixed(1)} ms)`,
    );
    console.log(`  ListDevices CPU        per whole listing: the client ${listClientCpuMs.toFixed(1)} ms, the coordinator ${listCoordCpuMs.toFixed(1)} ms (its heartbeats included)`);
    console.log(
      `  peak RSS               ${mem.peakRss.toFixed(0)} MiB (idle ${idleMem.rss.toFixed(0)} MiB, ratio ${r(mem.peakRss / idleMem.rss)}; target ${RSS_TARGET_MIB} MiB); peak by the end of the attach ${
        attachedMem.peakRss.toFixed(0)
      } MiB, steady ${steadyMem.rss.toFixed(0)} MiB`,
    );
    emitReport(
      "coordinator-load",
      [
        {
          measure: `coordinator CPU, ${AGENTS} agents x ${DEVICES} devices`,
          instant: `${pct(loadCpu)} of a core`,
          baseline: `${floorText((f) => pct(f.cpu))}idle ${pct(idle.user + idle.system)}`,
          realistic: null,
          target: `<= ${pct(CPU_TARGET)}`,
          pass: loadCpu <= CPU_TARGET,
        },
        {
          measure: `ListDevices, all ${AGENTS * DEVICES} (another process)`,
          instant: `${listMedian.toFixed(1)} ms`,
          baseline: `empty RPC ${baselineRpc.toFixed(2)} ms`,
          realistic: null,
          target: `<= ${LIST_TARGET_MS} ms`,
          pass: listMedian <= LIST_TARGET_MS,
        },
        {
          measure: "coordinator peak RSS under that load",
          // The steady figure beside the peak: the peak swings 10-30 MiB between runs with the listings' garbage (docs/performance.md, round 14).
          instant: `${mem.peakRss.toFixed(0)} MiB (steady ${steadyMem.rss.toFixed(0)} MiB)`,
          baseline: `${floorText((f) => `${f.peakRss.toFixed(0)} MiB`)}idle ${idleMem.rss.toFixed(0)} MiB`,
          realistic: null,
          target: `<= ${RSS_TARGET_MIB} MiB`,
          pass: mem.peakRss <= RSS_TARGET_MIB,
        },
      ],
      report,
    );
  } finally {
    await endChild(swarm);
    await endChild(floor);
    await coord.stop();
    await dir.remove();
  }
}

await main();
process.exit(0);
