/**
 * CLI cold start: wall time from spawn to exit of a fresh `farm` process,
 * against `node -e 0` (Node's own start-up) in the same run, interleaved
 * round by round so load drifts hit every command alike. The bundled CLI is
 * installed the way `make install` does it (scripts/bundle-cli.mjs and
 * scripts/install-cli.mjs, into a temp prefix) and run from PATH; the
 * unbundled one is `node cli/dist/main.js`. Client commands go to a local
 * `farm standalone` with one simulated phone (test/support/lab.ts); `farm
 * shell -- true` is also set against `adb shell true` on the same phone.
 *
 *   node test/dist/bench/cli-cold-start.js [--runs 30]
 *
 * Targets: bundled `farm --version` <= 1.5x `node -e 0`, `farm devices` <= 3x.
 */
import { spawn } from "node:child_process";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { adbBinary } from "../devsim/index.js";
import { farm, farmBin } from "../support/farm-process.js";
import { installCli } from "../support/installed-cli.js";
import { startLab } from "../support/lab.js";
import { emitReport } from "./bench-report.js";
import { median, percentile } from "./proc-stats.js";

const { values } = parseArgs({ options: { runs: { type: "string", default: "30" }, warmup: { type: "string", default: "3" } } });
const RUNS = Number(values.runs);
const WARMUP = Number(values.warmup);

interface Case {
  name: string;
  cmd: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  times: number[];
}

/** Wall milliseconds from spawn to exit; throws unless it exits 0. */
function timeRun(c: Case): Promise<number> {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const proc = spawn(c.cmd, c.args, { env: c.env, stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    proc.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    proc.once("error", reject);
    proc.once("exit", (code) => {
      const ms = performance.now() - t;
      if (code === 0) resolve(ms);
      else reject(new Error(`${c.name} exited ${code}: ${err}`));
    });
  });
}

async function main(): Promise<void> {
  const lab = await startLab("bench-cli");
  try {
    const t = performance.now();
    const cli = installCli(lab.dir.path);
    console.log(`bundled and installed in ${((performance.now() - t) / 1000).toFixed(1)} s into ${cli.prefix}`);
    const { serial } = await lab.addDevice({ serialno: "COLD0001" });
    // The same pair on a phone under the pixel-usb latency profile: what a user sees.
    const { serial: usbSerial } = await lab.addDevice({ serialno: "COLD0002", latency: "pixel-usb", latencySeed: 4 });
    const usbLease = await farm(["lease", "acquire", "--device", usbSerial, "--ttl", "10m"], lab.env);
    const usbToken = (usbLease.json["lease"] as { token: string } | undefined)?.token;
    if (!usbToken) throw new Error(`lease acquire failed: ${usbLease.stdout}${usbLease.stderr}`);
    const lease = await farm(["lease", "acquire", "--device", serial, "--ttl", "10m"], lab.env);
    const token = (lease.json["lease"] as { token: string } | undefined)?.token;
    if (!token) throw new Error(`lease acquire failed: ${lease.stdout}${lease.stderr}`);

    // The same environment for every command: the lab's home, JSON output, `farm` on PATH.
    const env: NodeJS.ProcessEnv = { ...cli.env, ...lab.env, FARM_OUTPUT: "json", FARM_LEASE: token, FARM_DEVICE: serial };
    const mk = (name: string, cmd: string, args: string[]): Case => ({ name, cmd, args, env, times: [] });
    const node = process.execPath;
    const cases = [
      mk("node -e 0", node, ["-e", "0"]),
      mk("farm --version (bundled, PATH)", "farm", ["--version"]),
      mk("node cli/dist/main.js --version", node, [farmBin, "--version"]),
      mk("farm devices (bundled)", "farm", ["devices"]),
      mk("node cli/dist/main.js devices", node, [farmBin, "devices"]),
      mk("farm shell -- true (bundled)", "farm", ["shell", "--", "true"]),
      mk("adb shell true", adbBinary(), ["-P", String(lab.adb.port), "-s", serial, "shell", "true"]),
      { ...mk("farm shell -- true (pixel-usb)", "farm", ["shell", "--", "true"]), env: { ...env, FARM_LEASE: usbToken, FARM_DEVICE: usbSerial } },
      mk("adb shell true (pixel-usb)", adbBinary(), ["-P", String(lab.adb.port), "-s", usbSerial, "shell", "true"]),
    ];
    for (let i = 0; i < WARMUP + RUNS; i++) {
      for (const c of cases) {
        const ms = await timeRun(c);
        if (i >= WARMUP) c.times.push(ms);
      }
    }

    const base = median(cases[0]!.times);
    const stat = (c: Case) => ({ median: median(c.times), p90: percentile(c.times, 90), ratio: median(c.times) / base });
    console.log(`CLI cold start, ${RUNS} runs each (after ${WARMUP} warm-up), interleaved; wall time spawn -> exit`);
    for (const c of cases) {
      const s = stat(c);
      console.log(`  ${c.name.padEnd(34)} median ${s.median.toFixed(1).padStart(6)} ms  p90 ${s.p90.toFixed(1).padStart(6)} ms  ${s.ratio.toFixed(2)}x node -e 0`);
    }
    const [, version, versionDist, devices, devicesDist, shell, adbShell, usbShell, usbAdbShell] = cases.map(stat) as ReturnType<typeof stat>[];
    const verdict = (ok: boolean) => (ok ? "met" : "MISSED");
    console.log(`  --version: ${version!.ratio.toFixed(2)}x (target <= 1.5: ${verdict(version!.ratio <= 1.5)}), unbundled ${versionDist!.ratio.toFixed(2)}x`);
    console.log(`  devices:   ${devices!.ratio.toFixed(2)}x (target <= 3: ${verdict(devices!.ratio <= 3)}), unbundled ${devicesDist!.ratio.toFixed(2)}x`);
    console.log(`  shell -- true: ${(shell!.median / adbShell!.median).toFixed(2)}x adb shell true (+${(shell!.median - adbShell!.median).toFixed(1)} ms)`);
    console.log(`  shell -- true (pixel-usb): ${(usbShell!.median / usbAdbShell!.median).toFixed(2)}x adb shell true`);
    const round = (x: number) => Number(x.toFixed(2));
    emitReport(
      "cli-cold-start",
      [
        { measure: "farm --version vs node -e 0", instant: `${version!.ratio.toFixed(2)}x (${version!.median.toFixed(0)} ms)`, realistic: null, target: "<= 1.5x", pass: version!.ratio <= 1.5 },
        { measure: "farm devices vs node -e 0", instant: `${devices!.ratio.toFixed(2)}x (${devices!.median.toFixed(0)} ms)`, realistic: null, target: "<= 3x", pass: devices!.ratio <= 3 },
        { measure: "farm shell -- true vs adb shell true", instant: `+${(shell!.median - adbShell!.median).toFixed(0)} ms`, realistic: round(usbShell!.median / usbAdbShell!.median), profile: "pixel-usb", target: "", pass: null },
      ],
      {
        runs: RUNS,
        nodeMedianMs: round(base),
        versionMedianMs: round(version!.median),
        versionRatio: round(version!.ratio),
        versionUnbundledRatio: round(versionDist!.ratio),
        devicesMedianMs: round(devices!.median),
        devicesRatio: round(devices!.ratio),
        devicesUnbundledRatio: round(devicesDist!.ratio),
        shellMedianMs: round(shell!.median),
        adbShellMedianMs: round(adbShell!.median),
        pixelUsbShellMedianMs: round(usbShell!.median),
        pixelUsbAdbShellMedianMs: round(usbAdbShell!.median),
      },
    );
  } finally {
    await lab.stop();
  }
}

await main();
process.exit(0);
