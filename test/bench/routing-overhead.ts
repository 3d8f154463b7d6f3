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
import { createClient } from "@connectrpc/connect";
import { farmTransport } from "@farm/shared/farm-transport";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { Health } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { randomUUID } from "node:crypto";
import { DeviceJobs } from "@farm/agent/actions/device-job";
import type { ActionRow } from "@farm/agent/ownership/ownership-journal";
import { startLab } from "../support/lab.js";
import { median, percentile } from "./proc-stats.js";

const { values } = parseArgs({ options: { calls: { type: "string", default: "300" }, protocol: { type: "string", default: "connect" } } });
const N = Number(values.calls);
const protocol = values.protocol === "grpc" ? "grpc" : "connect";
const adbkit = createRequire(import.meta.url)("@devicefarmer/adbkit") as { Adb: { createClient(o: { port: number }): AdbkitClient; util: { readAll(s: unknown): Promise<Buffer> } } };
interface AdbkitClient {
  getDevice(serial: string): { shell(cmd: string): Promise<unknown> };
}

async function main(): Promise<void> {
  const lab = await startLab("bench-routing", { logLevel: "info" });
  try {
    const { serial } = await lab.addDevice({ serialno: "ROUTE0001" });
    const admin = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
    // The client library the CLI uses (farmTransport), with the lease as the CLI sends it.
    const url = String(lab.standalone.ready["url"]);
    const lease = (await createClient(LeaseService, farmTransport({ url, token: admin, protocol })).acquireLease({ selector: { serial }, ttlMs: 600_000 })).token;
    const transport = farmTransport({ url, token: admin, headers: { "x-farm-lease": lease }, protocol });
    const devices = createClient(DeviceService, transport);
    const direct = adbkit.Adb.createClient({ port: lab.adb.port }).getDevice(serial);
    // What the phone runs for a journaled shell (a detached job with its completion record), sent directly: the device's share of the difference.
    const jobs = new DeviceJobs({ host: "127.0.0.1", port: lab.adb.port }, () => []);
    const runJob = async () => {
      const action = { actionId: randomUUID(), requestSha256: "0".repeat(64), createdAt: Date.now() } as ActionRow;
      const r = await jobs.run(serial, "echo hi", action, AbortSignal.timeout(10_000), { phase: "before", note: () => {} });
      void jobs.acknowledge(serial, action);
      return r;
    };

    const health = createClient(Health, transport);
    const empty: number[] = [];
    for (let i = 0; i < 100; i++) {
      const t = performance.now();
      await health.check({});
      empty.push(performance.now() - t);
    }
    console.log(`  empty RPC (health) median ${median(empty.slice(20)).toFixed(2)} ms`);
    const bare: number[] = [];
    const job: number[] = [];
    const routed: number[] = [];
    const read: number[] = [];
    for (let i = 0; i < N + 20; i++) {
      let t = performance.now();
      await adbkit.Adb.util.readAll(await direct.shell("echo hi"));
      const b = performance.now() - t;
      t = performance.now();
      if ((await runJob()).exitCode !== 0) throw new Error("direct job failed");
      const j = performance.now() - t;
      t = performance.now();
      const r = await devices.runShell({ target: { serial }, command: "echo hi" });
      const ro = performance.now() - t;
      if (r.exitCode !== 0) throw new Error("routed shell failed");
      t = performance.now();
      await devices.getOwnership({ target: { serial } });
      const rd = performance.now() - t;
      if (i < 20) continue; // warm-up
      bare.push(b);
      job.push(j);
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
      directJobMedianMs: Number(median(job).toFixed(2)),
      addedOverDirectJobMedianMs: Number((mr - median(job)).toFixed(2)),
      protocol,
    };
    console.log(`routing overhead over ${N} calls, same simulated phone`);
    console.log(`  direct adbkit shell echo        median ${mb.toFixed(2)} ms, p99 ${percentile(bare, 99).toFixed(2)} ms`);
    console.log(`  routed shell echo (journaled)   median ${mr.toFixed(2)} ms, p99 ${percentile(routed, 99).toFixed(2)} ms  (added median ${(mr - mb).toFixed(2)} ms, target <= 3; ratio ${(mr / mb).toFixed(2)})`);
    console.log(`  direct device job (same script) median ${median(job).toFixed(2)} ms  (the phone's share; farm's own: ${(mr - median(job)).toFixed(2)} ms)`);
    console.log(`  routed read (ownership status)  median ${median(read).toFixed(2)} ms`);
    console.log(JSON.stringify(report));
  } finally {
    await lab.stop();
  }
}

await main();
process.exit(0);
