/**
 * Coordinator load: many lightweight simulated agents (gRPC clients only, no
 * adb) attach to a real coordinator process, each reporting devices and
 * heartbeating. Prints the coordinator's CPU as a fraction of one core, the
 * ListDevices latency over all devices, and peak RSS, each as a ratio to its
 * target and to a baseline measured in the same run.
 *
 *   node test/dist/bench/coordinator-load.js [--agents 1000] [--devices 10] [--heartbeat-ms 5000] [--window-s 30]
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ListDevicesRequestSchema, ListDevicesResponseSchema, RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { TokenKind, TokenService } from "@farm/shared/gen/farm/v1/token_service_pb";
import { Health } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { startFarm } from "../support/farm-process.js";
import { attachFakeAgent, bearer, fakeDevices } from "../support/fake-agent.js";
import { makeTempDir } from "../support/temp-dir.js";
import { emitReport } from "./bench-report.js";
import { cpuSeconds, median, memoryMiB, percentile } from "./proc-stats.js";

const { values } = parseArgs({
  options: {
    agents: { type: "string", default: "1000" },
    devices: { type: "string", default: "10" },
    "heartbeat-ms": { type: "string", default: "5000" },
    "window-s": { type: "string", default: "30" },
  },
});
const AGENTS = Number(values.agents);
const DEVICES = Number(values.devices);
const HEARTBEAT_MS = Number(values["heartbeat-ms"]);
const WINDOW_S = Number(values["window-s"]);

async function timeCalls(n: number, call: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await call();
    out.push(performance.now() - t0);
  }
  return out;
}

async function main(): Promise<void> {
  const dir = await makeTempDir("bench");
  const coord = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", join(dir.path, "data")], { FARM_LOG_LEVEL: "warn" });
  const stop = new AbortController();
  try {
    const url = coord.ready["url"] as string;
    const admin = (await readFile(coord.ready["adminTokenFile"] as string, "utf8")).trim();
    const userTransport = createGrpcTransport({ baseUrl: url, interceptors: [bearer(admin)] });
    const registry = createClient(RegistryService, userTransport);
    const health = createClient(Health, userTransport);
    // An agent token is one agent: each fake agent gets its own.
    const tokenService = createClient(TokenService, userTransport);
    const agentToken = async (i: number) => (await tokenService.createToken({ name: `bench-${i}`, kind: TokenKind.AGENT })).token;

    // Baselines in this run: an empty RPC, and the idle process.
    await timeCalls(50, () => health.check({}));
    const baselineRpc = median(await timeCalls(200, () => health.check({})));
    const idleMem = memoryMiB(coord.pid);
    const idleCpu0 = cpuSeconds(coord.pid);
    const idleT0 = performance.now();
    await new Promise((r) => setTimeout(r, 3_000));
    const idleCpu = (cpuSeconds(coord.pid) - idleCpu0) / ((performance.now() - idleT0) / 1000);

    const attachT0 = performance.now();
    for (let i = 0; i < AGENTS; i += 50) {
      await Promise.all(
        Array.from({ length: Math.min(50, AGENTS - i) }, async (_, k) => attachFakeAgent({ url, token: await agentToken(i + k), index: i + k, devices: fakeDevices(i + k, DEVICES), heartbeatMs: HEARTBEAT_MS, signal: stop.signal })),
      );
    }
    // Every device, in pages of the largest size the API serves.
    const allDevices = async (opts: { onHeader?: (h: Headers) => void } = {}) => {
      const devices = [];
      let pageToken = "";
      do {
        const page = await registry.listDevices({ pageSize: 1000, pageToken }, opts);
        devices.push(...page.devices);
        pageToken = page.nextPageToken;
      } while (pageToken !== "");
      return devices;
    };
    for (;;) {
      const n = (await allDevices()).length;
      if (n >= AGENTS * DEVICES) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const attachS = (performance.now() - attachT0) / 1000;

    // Steady state: heartbeats only.
    const cpu0 = cpuSeconds(coord.pid);
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, WINDOW_S * 1000));
    const loadCpu = (cpuSeconds(coord.pid) - cpu0) / ((performance.now() - t0) / 1000);

    const serverMs: number[] = [];
    // The whole list, as a client that needs every device reads it: the server time is the sum over its pages.
    const list = await timeCalls(30, async () => {
      let total = 0;
      await allDevices({
        onHeader: (h) => {
          const dur = /dur=([\d.]+)/.exec(h.get("server-timing") ?? "")?.[1];
          if (dur) total += Number(dur);
        },
      });
      serverMs.push(total);
    });
    const listMedian = median(list);
    const serverMedian = median(serverMs);
    // One page of 1000 as raw bytes (Connect protocol, binary), to split the
    // end-to-end time into coordinator + transfer and client-side decoding.
    let body = new Uint8Array();
    const raw = await timeCalls(30, async () => {
      const res = await fetch(`${url}/farm.v1.RegistryService/ListDevices`, {
        method: "POST",
        headers: { "content-type": "application/proto", authorization: `Bearer ${admin}` },
        body: toBinary(ListDevicesRequestSchema, create(ListDevicesRequestSchema, { pageSize: 1000 })),
      });
      body = new Uint8Array(await res.arrayBuffer());
    });
    const rawMedian = median(raw);
    const decodeMedian = median(await timeCalls(10, async () => fromBinary(ListDevicesResponseSchema, body)));
    // Every page: the default page is 100 agents.
    let agentsOnline = 0;
    let agentPage = "";
    do {
      const page = await registry.listAgents({ pageSize: 1000, pageToken: agentPage });
      agentsOnline += page.agents.filter((a) => a.online).length;
      agentPage = page.nextPageToken;
    } while (agentPage !== "");
    const mem = memoryMiB(coord.pid);

    const r = (x: number) => x.toFixed(3);
    const report = {
      agents: AGENTS,
      devicesPerAgent: DEVICES,
      heartbeatMs: HEARTBEAT_MS,
      agentsOnline,
      attachSeconds: Number(attachS.toFixed(2)),
      coordinatorCpuCores: Number(r(loadCpu)),
      idleCpuCores: Number(r(idleCpu)),
      cpuRatioToTarget: Number(r(loadCpu / 0.1)),
      listDevicesMedianMs: Number(listMedian.toFixed(2)),
      listDevicesP90Ms: Number(percentile(list, 90).toFixed(2)),
      listDevicesServerMedianMs: Number(serverMedian.toFixed(2)),
      listDevicesBytesMedianMs: Number(rawMedian.toFixed(2)),
      listDevicesDecodeMedianMs: Number(decodeMedian.toFixed(2)),
      responseBytes: body.length,
      baselineEmptyRpcMs: Number(baselineRpc.toFixed(2)),
      listDevicesRatioToEmptyRpc: Number(r(listMedian / baselineRpc)),
      listDevicesRatioToTarget: Number(r(listMedian / 100)),
      peakRssMiB: Number(mem.peakRss.toFixed(1)),
      idleRssMiB: Number(idleMem.rss.toFixed(1)),
      peakRssRatioToIdle: Number(r(mem.peakRss / idleMem.rss)),
    };
    console.log(`coordinator load: ${AGENTS} agents x ${DEVICES} devices, heartbeat ${HEARTBEAT_MS} ms, window ${WINDOW_S} s`);
    console.log(`  agents online          ${agentsOnline}/${AGENTS} (attached in ${attachS.toFixed(1)} s)`);
    console.log(`  coordinator CPU        ${(loadCpu * 100).toFixed(2)}% of one core  (ratio to 10% target: ${r(loadCpu / 0.1)}; idle ${(idleCpu * 100).toFixed(2)}%)`);
    console.log(`  ListDevices (${AGENTS * DEVICES})  median ${listMedian.toFixed(1)} ms  (ratio to 100 ms target: ${r(listMedian / 100)}; to empty RPC ${baselineRpc.toFixed(2)} ms: ${r(listMedian / baselineRpc)}x)`);
    console.log(
      `  ListDevices split      registry ${serverMedian.toFixed(1)} ms; request to last byte ${rawMedian.toFixed(1)} ms (ratio to target ${r(rawMedian / 100)}); client decode of ${(body.length / 1048576).toFixed(1)} MiB ${
        decodeMedian.toFixed(1)
      } ms`,
    );
    console.log(`  peak RSS               ${mem.peakRss.toFixed(0)} MiB  (idle ${idleMem.rss.toFixed(0)} MiB, ratio ${r(mem.peakRss / idleMem.rss)})`);
    emitReport(
      "coordinator-load",
      [
        { measure: `coordinator CPU, ${AGENTS} agents x ${DEVICES} devices`, instant: `${(loadCpu * 100).toFixed(2)}% of a core`, realistic: null, target: "<= 10%", pass: loadCpu <= 0.1 },
        { measure: `ListDevices, all ${AGENTS * DEVICES}`, instant: `${listMedian.toFixed(1)} ms`, realistic: null, target: "<= 100 ms", pass: listMedian <= 100 },
        { measure: "  coordinator peak RSS", instant: `${mem.peakRss.toFixed(0)} MiB`, realistic: null, target: "", pass: null },
      ],
      report,
    );
  } finally {
    stop.abort();
    await coord.stop();
    await dir.remove();
  }
}

await main();
process.exit(0);
