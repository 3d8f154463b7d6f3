/**
 * End-to-end `farm evidence capture` (the bundled CLI, installed as `make
 * install` does) through `farm standalone` against the
 * minimal equivalent on the same simulated phone in the same run: two raw
 * adb CLI commands (`adb exec-out screencap -p` into a file, and a
 * UIAutomator dump read back). Medians of interleaved runs; before the raw commands and
 * again before farm's run the phone's delays are reseeded alike, so both
 * meet the same phone (see DeviceLatency).
 *
 * On an instant phone (1080x2400 and 1440x3120) the difference is farm's
 * own cost, split into CLI start-up, the capture RPC (coordinator, agent,
 * the agent's adb reads and storing), and the transfer to the CLI with its
 * verification; those two are timed in-process with the client library
 * the CLI uses. On a 1080x2400 phone under the pixel-usb latency profile the
 * ratio is what a user sees (target <= 1.3).
 *
 *   node test/dist/bench/evidence-capture.js [--runs 10] [--realistic-runs 5]
 */
import { spawn } from "node:child_process";
import { createWriteStream, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { writePulledBundle } from "@farm/client/bundle-writer";
import { farmTransport } from "@farm/shared/farm-transport";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { DeviceTargetSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import { DEVICE_PROFILES, adbBinary } from "../devsim/index.js";
import type { LatencyProfileName } from "../devsim/latency/latency-profiles.js";
import { installCli } from "../support/installed-cli.js";
import { startLab, type Lab } from "../support/lab.js";
import { addedMs, emitReport, round, type BenchRow } from "./bench-report.js";
import { median, memoryMiB } from "./proc-stats.js";

const { values } = parseArgs({ options: { runs: { type: "string", default: "10" }, "realistic-runs": { type: "string", default: "10" } } });
const RUNS = Number(values.runs);
const REALISTIC_RUNS = Number(values["realistic-runs"]);

/** Runs a command to completion, stdout optionally to a file; returns wall ms and peak RSS (MiB). */
function timed(cmd: string, args: string[], env: NodeJS.ProcessEnv, stdoutFile?: string): Promise<{ ms: number; peakMiB: number; code: number | null }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const proc = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", stdoutFile ? "pipe" : "ignore", "ignore"] });
    const out = stdoutFile ? createWriteStream(stdoutFile) : undefined;
    if (out) proc.stdout?.pipe(out);
    // The file is whole once its stream closes, which can be after the process exits (its open alone is asynchronous).
    const written = out ? new Promise<void>((res, rej) => out.once("close", () => res()).once("error", rej)) : Promise.resolve();
    let peak = 0;
    const sample = setInterval(() => {
      try {
        const p = memoryMiB(proc.pid as number).peakRss;
        if (Number.isFinite(p)) peak = Math.max(peak, p);
      } catch {
        /* exited */
      }
    }, 10);
    proc.once("error", reject);
    proc.once("exit", (code) => {
      clearInterval(sample);
      const ms = performance.now() - t0;
      written.then(() => resolve({ ms, peakMiB: peak, code }), reject);
    });
  });
}

interface Sizes {
  raw: number;
  farm: number;
  /** In-process: the capture RPC, then the pull with the CLI's writer and verification. */
  rpc: number;
  pull: number;
  cliStart: number;
  cliPeak: number;
}

/** `farm` as users install it (make install: the esbuild bundle on PATH). */
let cliEnv: NodeJS.ProcessEnv = {};

async function measure(lab: Lab, admin: string, width: number, height: number, latency: LatencyProfileName, runs: number, inProcess: boolean): Promise<Sizes> {
  const base = DEVICE_PROFILES[0];
  if (!base) throw new Error("no device profile");
  const { serial, device } = await lab.addDevice({ profile: { ...base, width, height, density: width === 1440 ? 560 : 420 }, latency, latencySeed: 5 });
  const adbEnv = { ANDROID_ADB_SERVER_PORT: String(lab.adb.port) };
  const client = createClient(EvidenceService, farmTransport({ url: String(lab.standalone.ready["url"]), token: admin }));
  const raw: number[] = [];
  const farm: number[] = [];
  const rpc: number[] = [];
  const pull: number[] = [];
  const start: number[] = [];
  let cliPeak = 0;
  const tag = `${latency}-${width}`;
  for (let i = 0; i < runs + 1; i++) {
    const shot = join(lab.dir.path, `raw-${tag}-${i}.png`);
    // The same phone delays for the raw commands and for farm's run (each kind of delay has its own seeded stream).
    device.state.latency.reseed(100 + i);
    const a = await timed(adbBinary(), ["-P", String(lab.adb.port), "-s", serial, "exec-out", "screencap", "-p"], adbEnv, shot);
    const b = await timed(adbBinary(), ["-P", String(lab.adb.port), "-s", serial, "shell", "uiautomator dump /sdcard/bench.xml >/dev/null && cat /sdcard/bench.xml"], adbEnv, join(lab.dir.path, `raw-${tag}-${i}.xml`));
    if (a.code !== 0 || b.code !== 0 || readFileSync(shot).length === 0) throw new Error("raw adb capture failed");
    device.state.latency.reseed(100 + i);
    const f = await timed("farm", ["evidence", "capture", "--device", serial, "--output-dir", join(lab.dir.path, `farm-${tag}-${i}`)], cliEnv);
    if (f.code !== 0) throw new Error("farm evidence capture failed");
    if (inProcess) {
      // The CLI's own start-up: the same binary doing no work.
      const v = await timed("farm", ["--version"], cliEnv);
      device.state.latency.reseed(100 + i);
      let t = performance.now();
      const res = await client.captureEvidence({ target: create(DeviceTargetSchema, { serial }), contextJson: "{}", timeoutMs: 30_000, cliVersion: "bench" });
      const r = performance.now() - t;
      t = performance.now();
      await writePulledBundle({ dir: join(lab.dir.path, `lib-${tag}-${i}`), evidenceId: res.evidenceId, claim: true }, client.pullEvidence({ evidenceId: res.evidenceId }));
      const p = performance.now() - t;
      if (i > 0) {
        start.push(v.ms);
        rpc.push(r);
        pull.push(p);
      }
    }
    if (i === 0) continue; // warm-up
    raw.push(a.ms + b.ms);
    farm.push(f.ms);
    cliPeak = Math.max(cliPeak, f.peakMiB);
  }
  const m = (xs: number[]) => (xs.length > 0 ? median(xs) : NaN);
  return { raw: m(raw), farm: m(farm), rpc: m(rpc), pull: m(pull), cliStart: m(start), cliPeak };
}

async function main(): Promise<void> {
  const lab = await startLab("bench-evidence", { logLevel: "info" });
  try {
    const admin = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
    cliEnv = { ...installCli(lab.dir.path).env, ...lab.env };
    const small = await measure(lab, admin, 1080, 2400, "instant", RUNS, true);
    const large = await measure(lab, admin, 1440, 3120, "instant", RUNS, true);
    const usb = await measure(lab, admin, 1080, 2400, "pixel-usb", REALISTIC_RUNS, true);
    const standalonePeak = memoryMiB(lab.standalone.pid).peakRss;
    const usbRatio = usb.farm / usb.raw;
    console.log(`evidence capture through farm standalone vs two raw adb commands, medians (instant: ${RUNS} runs, pixel-usb: ${REALISTIC_RUNS})`);
    const rows: BenchRow[] = [];
    for (const [name, s] of [["1080x2400", small], ["1440x3120", large]] as const) {
      const added = s.farm - s.raw;
      // What the capture RPC adds over the raw commands' own work is farm's RPCs, agent and storage; the rest is start-up and transfer.
      console.log(
        `  ${name} instant: farm ${s.farm.toFixed(0)} ms vs raw adb ${s.raw.toFixed(0)} ms (added ${added.toFixed(0)} ms): CLI start ${s.cliStart.toFixed(0)} ms, capture RPC ${s.rpc.toFixed(0)} ms, transfer + verification ${
          s.pull.toFixed(0)
        } ms`,
      );
      rows.push({
        measure: `evidence capture ${name}, added`,
        instant: addedMs(added, 0),
        realistic: name === "1080x2400" ? round(usbRatio, 2) : null,
        profile: "pixel-usb",
        target: "<= 1.3x (pixel-usb)",
        pass: name === "1080x2400" ? usbRatio <= 1.3 : null,
      });
      rows.push({ measure: `  ${name}: CLI start / capture RPC / transfer+verify`, instant: `${s.cliStart.toFixed(0)} / ${s.rpc.toFixed(0)} / ${s.pull.toFixed(0)} ms`, realistic: null, target: "", pass: null });
    }
    console.log(
      `  1080x2400 pixel-usb: farm ${usb.farm.toFixed(0)} ms vs raw adb ${usb.raw.toFixed(0)} ms (ratio ${usbRatio.toFixed(3)}, target <= 1.3): CLI start ${usb.cliStart.toFixed(0)} ms, capture RPC ${
        usb.rpc.toFixed(0)
      } ms, transfer + verification ${usb.pull.toFixed(0)} ms`,
    );
    console.log(`  peak RSS: CLI ${Math.max(small.cliPeak, large.cliPeak, usb.cliPeak).toFixed(0)} MiB, standalone (coordinator + agent) ${standalonePeak.toFixed(0)} MiB`);
    emitReport("evidence-capture", rows, {
      instant1080: small,
      instant1440: large,
      pixelUsb1080: usb,
      cliPeakRssMiB: round(Math.max(small.cliPeak, large.cliPeak, usb.cliPeak), 1),
      standalonePeakRssMiB: round(standalonePeak, 1),
    });
  } finally {
    await lab.stop();
  }
}

await main();
process.exit(0);
