/**
 * Routing overhead: `shell echo` through the coordinator (a persistent
 * client, with a lease) against the same command sent directly with adbkit
 * on the agent host, same phone, same run, interleaved. Also a read routed
 * to the agent (ownership status), which skips the journal.
 *
 *   node test/dist/bench/routing-overhead.js [--calls 300]
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { noDelaySessionOptions } from "@farm/shared/no-delay";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { Health } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { startLab } from "../support/lab.js";
import { median, percentile } from "./proc-stats.js";

const { values } = parseArgs({ options: { calls: { type: "string", default: "300" } } });
const N = Number(values.calls);
const adbkit = createRequire(import.meta.url)("@devicefarmer/adbkit") as { Adb: { createClient(o: { port: number }): AdbkitClient; util: { readAll(s: unknown): Promise<Buffer> } } };
interface AdbkitClient {
  getDevice(serial: string): { shell(cmd: string): Promise<unknown> };
}

async function main(): Promise<void> {
  const lab = await startLab("bench-routing", { logLevel: "info" });
  try {
    const { serial } = await lab.addDevice({ serialno: "ROUTE0001" });
    const admin = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
    let lease = "";
    const auth: Interceptor = (next) => (req) => {
      req.header.set("authorization", `Bearer ${admin}`);
      if (lease) req.header.set("x-farm-lease", lease);
      return next(req);
    };
    const transport = createGrpcTransport({ baseUrl: String(lab.standalone.ready["url"]), interceptors: [auth], nodeOptions: noDelaySessionOptions() });
    lease = (await createClient(LeaseService, transport).acquireLease({ selector: { serial }, ttlMs: 600_000 })).token;
    const devices = createClient(DeviceService, transport);
    const direct = adbkit.Adb.createClient({ port: lab.adb.port }).getDevice(serial);

    const health = createClient(Health, transport);
    const empty: number[] = [];
    for (let i = 0; i < 100; i++) {
      const t = performance.now();
      await health.check({});
      empty.push(performance.now() - t);
    }
    console.log(`  empty RPC (health) median ${median(empty.slice(20)).toFixed(2)} ms`);
    const bare: number[] = [];
    const routed: number[] = [];
    const read: number[] = [];
    for (let i = 0; i < N + 20; i++) {
      let t = performance.now();
      await adbkit.Adb.util.readAll(await direct.shell("echo hi"));
      const b = performance.now() - t;
      t = performance.now();
      const r = await devices.runShell({ target: { serial }, command: "echo hi" });
      const ro = performance.now() - t;
      if (r.exitCode !== 0) throw new Error("routed shell failed");
      t = performance.now();
      await devices.getOwnership({ target: { serial } });
      const rd = performance.now() - t;
      if (i < 20) continue; // warm-up
      bare.push(b);
      routed.push(ro);
      read.push(rd);
    }
    const mb = median(bare);
    const mr = median(routed);
    const report = {
      calls: N,
      directAdbkitMedianMs: Number(mb.toFixed(2)),
      routedShellMedianMs: Number(mr.toFixed(2)),
      addedMedianMs: Number((mr - mb).toFixed(2)),
      addedP99Ms: Number((percentile(routed, 99) - percentile(bare, 99)).toFixed(2)),
      ratio: Number((mr / mb).toFixed(2)),
      routedReadMedianMs: Number(median(read).toFixed(2)),
    };
    console.log(`routing overhead over ${N} calls, same simulated phone`);
    console.log(`  direct adbkit shell echo        median ${mb.toFixed(2)} ms, p99 ${percentile(bare, 99).toFixed(2)} ms`);
    console.log(`  routed shell echo (journaled)   median ${mr.toFixed(2)} ms, p99 ${percentile(routed, 99).toFixed(2)} ms  (added median ${(mr - mb).toFixed(2)} ms, target <= 3; ratio ${(mr / mb).toFixed(2)})`);
    console.log(`  routed read (ownership status)  median ${median(read).toFixed(2)} ms`);
    console.log(JSON.stringify(report));
  } finally {
    await lab.stop();
  }
}

await main();
process.exit(0);
