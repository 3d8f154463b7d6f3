/**
 * End-to-end `farm evidence capture` through `farm standalone` against the
 * minimal equivalent on the same simulated phone in the same run: two raw
 * adb CLI commands (`adb exec-out screencap -p` into a file, and a
 * UIAutomator dump read back). Reports the median wall-time ratio for a
 * 1080x2400 and a 1440x3120 screen, and CLI and standalone peak RSS.
 *
 *   node test/dist/bench/evidence-capture.js [--runs 10]
 */
import { spawn } from "node:child_process";
import { createWriteStream, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { DEVICE_PROFILES, adbBinary } from "../devsim/index.js";
import { farmBin } from "../support/farm-process.js";
import { startLab } from "../support/lab.js";
import { median, memoryMiB } from "./proc-stats.js";

const { values } = parseArgs({ options: { runs: { type: "string", default: "10" } } });
const RUNS = Number(values.runs);

/** Runs a command to completion, stdout optionally to a file; returns wall ms and peak RSS (MiB). */
function timed(cmd: string, args: string[], env: NodeJS.ProcessEnv, stdoutFile?: string): Promise<{ ms: number; peakMiB: number; code: number | null }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const proc = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", stdoutFile ? "pipe" : "ignore", "ignore"] });
    if (stdoutFile) proc.stdout?.pipe(createWriteStream(stdoutFile));
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
      resolve({ ms: performance.now() - t0, peakMiB: peak, code });
    });
  });
}

async function main(): Promise<void> {
  const lab = await startLab("bench-evidence");
  const base = DEVICE_PROFILES[0];
  if (!base) throw new Error("no device profile");
  try {
    const lines: string[] = [];
    const report: Record<string, unknown> = { runs: RUNS };
    let cliPeak = 0;
    for (const [width, height] of [[1080, 2400], [1440, 3120]] as const) {
      const { serial } = await lab.addDevice({ profile: { ...base, width, height, density: width === 1440 ? 560 : 420 } });
      const adbEnv = { ANDROID_ADB_SERVER_PORT: String(lab.adb.port) };
      const raw: number[] = [];
      const farmTimes: number[] = [];
      for (let i = 0; i < RUNS + 1; i++) {
        const shot = join(lab.dir.path, `raw-${width}-${i}.png`);
        const a = await timed(adbBinary(), ["-P", String(lab.adb.port), "-s", serial, "exec-out", "screencap", "-p"], adbEnv, shot);
        const b = await timed(adbBinary(), ["-P", String(lab.adb.port), "-s", serial, "shell", "uiautomator dump /sdcard/bench.xml >/dev/null && cat /sdcard/bench.xml"], adbEnv, join(lab.dir.path, `raw-${width}-${i}.xml`));
        if (a.code !== 0 || b.code !== 0 || readFileSync(shot).length === 0) throw new Error("raw adb capture failed");
        const f = await timed(process.execPath, [farmBin, "evidence", "capture", "--device", serial, "--output-dir", join(lab.dir.path, `farm-${width}-${i}`)], lab.env);
        if (f.code !== 0) throw new Error("farm evidence capture failed");
        if (i === 0) continue; // warm-up
        raw.push(a.ms + b.ms);
        farmTimes.push(f.ms);
        cliPeak = Math.max(cliPeak, f.peakMiB);
      }
      const ratio = median(farmTimes) / median(raw);
      report[`${width}x${height}`] = { rawMedianMs: Number(median(raw).toFixed(1)), farmMedianMs: Number(median(farmTimes).toFixed(1)), ratio: Number(ratio.toFixed(3)) };
      lines.push(`  ${width}x${height}: farm ${median(farmTimes).toFixed(0)} ms vs raw adb ${median(raw).toFixed(0)} ms  (ratio ${ratio.toFixed(3)}, target <= 1.5)`);
    }
    const standalonePeak = memoryMiB(lab.standalone.pid).peakRss;
    report["cliPeakRssMiB"] = Number(cliPeak.toFixed(1));
    report["standalonePeakRssMiB"] = Number(standalonePeak.toFixed(1));
    console.log(`evidence capture, median of ${RUNS} runs each, through farm standalone vs two raw adb commands`);
    for (const l of lines) console.log(l);
    console.log(`  peak RSS: CLI ${cliPeak.toFixed(0)} MiB, standalone (coordinator + agent) ${standalonePeak.toFixed(0)} MiB`);
    console.log(JSON.stringify(report));
  } finally {
    await lab.stop();
  }
}

await main();
process.exit(0);
