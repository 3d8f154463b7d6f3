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
 *   node test/dist/bench/routing-overhead.js [--calls 300] [--realistic-calls 40] [--protocol connect|grpc]
 */
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { createClient } from "@connectrpc/connect";
import { DeviceJobs } from "@farm/agent/actions/device-job";
import type { ActionRow } from "@farm/agent/ownership/ownership-journal";
import { farmTransport } from "@farm/shared/farm-transport";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { Health } from "@farm/shared/gen/grpc/health/v1/health_pb";
import type { LatencyProfileName } from "../devsim/latency/latency-profiles.js";
import { startLab, type Lab } from "../support/lab.js";
import { addedMs, emitReport, ms, round } from "./bench-report.js";
import { median, percentile } from "./proc-stats.js";

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
}

async function measure(lab: Lab, admin: string, latency: LatencyProfileName, serialno: string, calls: number): Promise<Series> {
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
    const r = await jobs.run(serial, "echo hi", action, AbortSignal.timeout(10_000), { phase: "before", note: () => {} });
    void jobs.acknowledge(serial, action);
    return r;
  };
  const s: Series = { bare: [], job: [], routed: [], read: [] };
  const warm = Math.min(20, Math.ceil(calls / 4));
  // Interleaved, so every series sees the same machine noise.
  for (let i = 0; i < calls + warm; i++) {
    same(i);
    let t = performance.now();
    await adbkit.Adb.util.readAll(await direct.shell("echo hi"));
    const b = performance.now() - t;
    same(i);
    t = performance.now();
    if ((await runJob()).exitCode !== 0) throw new Error("direct job failed");
    const j = performance.now() - t;
    same(i);
    t = performance.now();
    const r = await devices.runShell({ target: { serial }, command: "echo hi" });
    const ro = performance.now() - t;
    if (r.exitCode !== 0) throw new Error("routed shell failed");
    t = performance.now();
    await devices.getOwnership({ target: { serial } });
    const rd = performance.now() - t;
    if (i < warm) continue;
    s.bare.push(b);
    s.job.push(j);
    s.routed.push(ro);
    s.read.push(rd);
  }
  return s;
}

async function main(): Promise<void> {
  const lab = await startLab("bench-routing", { logLevel: "info" });
  try {
    const admin = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
    const health = createClient(Health, farmTransport({ url: String(lab.standalone.ready["url"]), token: admin, protocol }));
    const empty: number[] = [];
    for (let i = 0; i < 120; i++) {
      const t = performance.now();
      await health.check({});
      empty.push(performance.now() - t);
    }
    const instant = await measure(lab, admin, "instant", "ROUTE0001", N);
    const usb = await measure(lab, admin, "pixel-usb", "ROUTE0002", NR);

    const mb = median(instant.bare);
    const mr = median(instant.routed);
    const mj = median(instant.job);
    const added = mr - mb;
    const addedP99 = percentile(instant.routed, 99) - percentile(instant.bare, 99);
    const usbRatio = median(usb.routed) / median(usb.bare);
    console.log(`routing overhead, ${N} calls on an instant phone and ${NR} on a pixel-usb one (protocol ${protocol})`);
    console.log(`  empty RPC (health)              median ${median(empty.slice(20)).toFixed(2)} ms`);
    console.log(`  direct adbkit shell echo        median ${mb.toFixed(2)} ms, p99 ${percentile(instant.bare, 99).toFixed(2)} ms`);
    console.log(`  routed shell echo (journaled)   median ${mr.toFixed(2)} ms, p99 ${percentile(instant.routed, 99).toFixed(2)} ms  (added median ${added.toFixed(2)} ms, target <= 3; p99 ${addedP99.toFixed(2)} ms, target <= 10)`);
    console.log(`  direct device job (same script) median ${mj.toFixed(2)} ms  (the phone's share; farm's own: ${(mr - mj).toFixed(2)} ms)`);
    console.log(`  routed read (ownership status)  median ${median(instant.read).toFixed(2)} ms`);
    console.log(`  pixel-usb: direct ${median(usb.bare).toFixed(1)} ms, direct job ${median(usb.job).toFixed(1)} ms, routed ${median(usb.routed).toFixed(1)} ms (ratio ${usbRatio.toFixed(2)}), read ${median(usb.read).toFixed(1)} ms`);
    emitReport(
      "routing-overhead",
      [
        { measure: "routed shell echo, added median", instant: addedMs(added), realistic: round(usbRatio, 2), profile: "pixel-usb", target: "<= +3 ms", pass: added <= 3 },
        { measure: "routed shell echo, added p99", instant: addedMs(addedP99), realistic: null, target: "<= +10 ms", pass: addedP99 <= 10 },
        { measure: "  of which the phone's job script", instant: addedMs(mj - mb), realistic: round(median(usb.job) / median(usb.bare), 2), profile: "pixel-usb", target: "", pass: null },
        { measure: "routed read (ownership status)", instant: ms(median(instant.read)), realistic: round(median(usb.read) / median(usb.bare), 2), profile: "pixel-usb", target: "", pass: null },
        { measure: "empty RPC (health)", instant: ms(median(empty.slice(20))), realistic: null, target: "", pass: null },
      ],
      {
        protocol,
        instant: { directMedianMs: round(mb, 2), routedMedianMs: round(mr, 2), directJobMedianMs: round(mj, 2), routedReadMedianMs: round(median(instant.read), 2) },
        pixelUsb: { directMedianMs: round(median(usb.bare), 2), routedMedianMs: round(median(usb.routed), 2), directJobMedianMs: round(median(usb.job), 2), routedReadMedianMs: round(median(usb.read), 2) },
      },
    );
  } finally {
    await lab.stop();
  }
}

await main();
process.exit(0);
