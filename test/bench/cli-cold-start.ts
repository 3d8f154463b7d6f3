/**
 * CLI cold start: wall time from spawn to exit of a fresh `farm` process,
 * against `node -e 0` (Node's own start-up) in the same run, interleaved
 * round by round so load drifts hit every command alike. The bundled CLI is
 * installed the way `make install` does it (scripts/bundle-cli.mjs and
 * scripts/pack-cli.mjs, npm install -g into a temp prefix) and run from PATH; the
 * unbundled one is `node cli/dist/main.js`. Client commands go to a local
 * `farm standalone` with two simulated phones (test/support/lab.ts), one
 * instant and one under the pixel-usb latency profile; `farm shell -- true`
 * is set against `adb shell true` on the same phone.
 *
 *   node test/dist/bench/cli-cold-start.js [--runs 30] [--callgrind] [--baseline farm-cli-X.tgz]
 *
 * --baseline installs another packed CLI (e.g. `make pack` of main) beside
 * this one and times its `farm devices` and pixel-usb `farm shell -- true`
 * in the same interleaved rounds (and, with --callgrind, counts them): a
 * before/after of a change on one loaded machine.
 *
 * --callgrind also counts the instructions (valgrind's callgrind, every
 * thread) of one run each of `node -e 0`, `farm --version`, `farm devices`,
 * `farm shell -- true` and `adb shell true` (its client): a count does not
 * move with the machine's load, so it compares builds across runs too.
 *
 * Targets (issue 38): bundled `farm --version` <= 1.1x `node -e 0`, `farm
 * devices` <= 2x, `farm shell -- true` on the pixel-usb phone <= 1.2x
 * (`node -e 0` + `adb shell true`). The pixel-usb shell runs with --verbose,
 * which prints the RPC's own time (client to answer): its wall time splits
 * into Node's start (node -e 0), the call, and the CLI's own work (loading
 * its code, parsing, building the call, exiting), each beside its floor.
 * One more run of it, with cli-stage-probe.ts preloaded (NODE_OPTIONS),
 * splits the CLI's own work further: loading and config (until the call's
 * socket connects), and printing and exiting (after the call's answer).
 */
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { adbBinary } from "../devsim/index.js";
import { farm, farmBin } from "../support/farm-process.js";
import { installCli, installTarball } from "../support/installed-cli.js";
import { startLab } from "../support/lab.js";
import { emitReport } from "./bench-report.js";
import { median, percentile } from "./proc-stats.js";

const { values } = parseArgs({ options: { runs: { type: "string", default: "30" }, warmup: { type: "string", default: "3" }, callgrind: { type: "boolean", default: false }, baseline: { type: "string" } } });
const RUNS = Number(values.runs);
const WARMUP = Number(values.warmup);

interface Case {
  name: string;
  cmd: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  times: number[];
}

/** What cli-stage-probe.ts prints at exit. */
const STAGES = /^farm-stages (\{.*\})$/m;
const probe = new URL("./cli-stage-probe.js", import.meta.url).href;

/** The RPC time `farm --verbose` prints ("farm: <method> x-request-id=… ok <ms> ms"). */
const VERBOSE_RPC = /^farm: \S+ x-request-id=\S+ ok (\d+) ms$/m;

/** Wall milliseconds from spawn to exit, and what it printed on stderr; throws unless it exits 0. */
function timeRun(c: Case): Promise<{ ms: number; err: string }> {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const proc = spawn(c.cmd, c.args, { env: c.env, stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    proc.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    proc.once("error", reject);
    proc.once("exit", (code) => {
      const ms = performance.now() - t;
      if (code === 0) resolve({ ms, err });
      else reject(new Error(`${c.name} exited ${code}: ${err}`));
    });
  });
}

/** Instructions one run of `c` executes under callgrind (all threads); throws unless it exits 0. */
function instructions(c: Case): Promise<number> {
  return new Promise((resolve, reject) => {
    // The installed `farm` is a `#!/usr/bin/env node` script: run by node itself so callgrind counts node, not env.
    const [cmd, args] = c.cmd === "farm" ? [process.execPath, [join(c.env["FARM_BIN_DIR"] ?? "", "farm"), ...c.args]] : [c.cmd, c.args];
    const proc = spawn("valgrind", ["--tool=callgrind", "--callgrind-out-file=/dev/null", cmd, ...args], { env: c.env, stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    proc.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    proc.once("error", reject);
    proc.once("exit", (code) => {
      const n = /Collected : (\d+)/.exec(err);
      if (code === 0 && n) resolve(Number(n[1]));
      else reject(new Error(`${c.name} under callgrind exited ${code}: ${err.slice(-2000)}`));
    });
  });
}

async function main(): Promise<void> {
  const lab = await startLab("bench-cli");
  try {
    const t = performance.now();
    const cli = installCli(lab.dir.path);
    console.log(`bundled and installed in ${((performance.now() - t) / 1000).toFixed(1)} s into ${cli.prefix}`);
    if (values.baseline) mkdirSync(join(lab.dir.path, "baseline"));
    const baseline = values.baseline ? installTarball(join(lab.dir.path, "baseline"), values.baseline) : undefined;
    if (baseline) console.log(`baseline ${values.baseline} installed into ${baseline.prefix}`);
    const { serial } = await lab.addDevice({ serialno: "COLD0001" });
    // The same pair on a phone under the pixel-usb latency profile: what a user sees.
    const { serial: usbSerial } = await lab.addDevice({ serialno: "COLD0002", latency: "pixel-usb", latencySeed: 4 });
    const usbLease = await farm(["lease", "acquire", "--device", usbSerial, "--ttl", "60m"], lab.env);
    const usbToken = (usbLease.json["lease"] as { token: string } | undefined)?.token;
    if (!usbToken) throw new Error(`lease acquire failed: ${usbLease.stdout}${usbLease.stderr}`);
    const lease = await farm(["lease", "acquire", "--device", serial, "--ttl", "60m"], lab.env);
    const token = (lease.json["lease"] as { token: string } | undefined)?.token;
    if (!token) throw new Error(`lease acquire failed: ${lease.stdout}${lease.stderr}`);

    // The same environment for every command: the lab's home, JSON output, `farm` on PATH.
    const env: NodeJS.ProcessEnv = { ...cli.env, ...lab.env, FARM_OUTPUT: "json", FARM_LEASE: token, FARM_DEVICE: serial, FARM_BIN_DIR: dirname(cli.bin) };
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
      { ...mk("farm shell -- true (pixel-usb)", "farm", ["shell", "--verbose", "--", "true"]), env: { ...env, FARM_LEASE: usbToken, FARM_DEVICE: usbSerial } },
      mk("adb shell true (pixel-usb)", adbBinary(), ["-P", String(lab.adb.port), "-s", usbSerial, "shell", "true"]),
      { ...mk("farm shell -- true (pixel-usb, probed)", "farm", ["shell", "--verbose", "--", "true"]), env: { ...env, FARM_LEASE: usbToken, FARM_DEVICE: usbSerial, NODE_OPTIONS: `--import ${probe}` } },
    ];
    // The baseline's commands, by absolute path (run by node, as callgrind runs `farm`).
    const baseCases = baseline
      ? [
        mk("baseline: farm devices", node, [baseline.bin, "devices"]),
        { ...mk("baseline: farm shell -- true (pixel-usb)", node, [baseline.bin, "shell", "--", "true"]), env: { ...env, FARM_LEASE: usbToken, FARM_DEVICE: usbSerial } },
        mk("this: farm devices", node, [cli.bin, "devices"]),
        { ...mk("this: farm shell -- true (pixel-usb)", node, [cli.bin, "shell", "--", "true"]), env: { ...env, FARM_LEASE: usbToken, FARM_DEVICE: usbSerial } },
      ]
      : [];
    const usbRpc: number[] = [];
    // Per probed run: Node's start and the process's end (the wall time the probe did not see), loading and config, the call, printing and exiting.
    const staged = { outside: [] as number[], load: [] as number[], call: [] as number[], after: [] as number[] };
    for (let i = 0; i < WARMUP + RUNS; i++) {
      for (const c of [...cases, ...baseCases]) {
        const { ms, err } = await timeRun(c);
        if (i < WARMUP) continue;
        c.times.push(ms);
        if (c.name === "farm shell -- true (pixel-usb)") {
          const rpc = VERBOSE_RPC.exec(err);
          if (!rpc) throw new Error(`farm shell --verbose printed no RPC time: ${err}`);
          usbRpc.push(Number(rpc[1]));
        }
        if (c.name === "farm shell -- true (pixel-usb, probed)") {
          const found = STAGES.exec(err);
          const rpc = VERBOSE_RPC.exec(err);
          if (!found || !rpc) throw new Error(`the probed farm shell printed no stages or RPC time: ${err}`);
          const m = JSON.parse(found[1]!) as { probe: number; connect?: number; exit: number };
          if (m.connect === undefined) throw new Error(`the probed farm shell connected no socket: ${err}`);
          const call = Number(rpc[1]);
          staged.outside.push(ms - (m.exit - m.probe));
          staged.load.push(m.connect - m.probe);
          staged.call.push(call);
          staged.after.push(m.exit - m.connect - call);
        }
      }
    }

    // Instructions (load-independent): one run each, against node -e 0's.
    const counted: Record<string, number> = {};
    if (values.callgrind) {
      for (const c of [cases[0]!, cases[1]!, cases[3]!, cases[5]!, cases[6]!, ...baseCases]) {
        counted[c.name] = await instructions(c);
        // As they come: a count taken is kept even if a later one fails.
        console.log(`  callgrind: ${c.name} ${counted[c.name]}`);
      }
      const node0 = counted[cases[0]!.name] ?? 1;
      console.log("Instructions (callgrind, one run each, all threads):");
      for (const [name, n] of Object.entries(counted)) console.log(`  ${name.padEnd(34)} ${(n / 1e6).toFixed(0).padStart(6)} M  ${(n / node0).toFixed(2)}x node -e 0`);
    }
    const base = median(cases[0]!.times);
    const stat = (c: Case) => ({ median: median(c.times), p90: percentile(c.times, 90), ratio: median(c.times) / base });
    console.log(`CLI cold start, ${RUNS} runs each (after ${WARMUP} warm-up), interleaved; wall time spawn -> exit`);
    for (const c of cases) {
      const s = stat(c);
      console.log(`  ${c.name.padEnd(34)} median ${s.median.toFixed(1).padStart(6)} ms  p90 ${s.p90.toFixed(1).padStart(6)} ms  ${s.ratio.toFixed(2)}x node -e 0`);
    }
    for (const c of baseCases) {
      const s = stat(c);
      console.log(`  ${c.name.padEnd(40)} median ${s.median.toFixed(1).padStart(6)} ms  p90 ${s.p90.toFixed(1).padStart(6)} ms  ${s.ratio.toFixed(2)}x node -e 0`);
    }
    const [, version, versionDist, devices, devicesDist, shell, adbShell, usbShell, usbAdbShell, probed] = cases.map(stat) as ReturnType<typeof stat>[];
    const verdict = (ok: boolean) => (ok ? "met" : "MISSED");
    // farm shell on a pixel-usb phone against what a user has without farm: Node's start plus adb's.
    const usbFloor = base + usbAdbShell!.median;
    const usbRatio = usbShell!.median / usbFloor;
    const rpc = median(usbRpc);
    const cliOwn = usbShell!.median - base - rpc;
    console.log(`  --version: ${version!.ratio.toFixed(2)}x (target <= 1.1: ${verdict(version!.ratio <= 1.1)}), unbundled ${versionDist!.ratio.toFixed(2)}x`);
    console.log(`  devices:   ${devices!.ratio.toFixed(2)}x (target <= 2: ${verdict(devices!.ratio <= 2)}), unbundled ${devicesDist!.ratio.toFixed(2)}x`);
    console.log(`  shell -- true: ${(shell!.median / adbShell!.median).toFixed(2)}x adb shell true (+${(shell!.median - adbShell!.median).toFixed(1)} ms)`);
    console.log(
      `  shell -- true (pixel-usb): ${usbRatio.toFixed(2)}x (node -e 0 + adb shell true) = ${usbShell!.median.toFixed(1)} / ${usbFloor.toFixed(1)} ms (target <= 1.2: ${verdict(usbRatio <= 1.2)})`,
    );
    console.log(
      `    stages: Node's start ${base.toFixed(1)} ms (floor: node -e 0) | the call ${rpc.toFixed(1)} ms (floor: adb shell true ${usbAdbShell!.median.toFixed(1)} ms) | the CLI's own ${cliOwn.toFixed(1)} ms (floor: 0)`,
    );
    const st = { outside: median(staged.outside), load: median(staged.load), call: median(staged.call), after: median(staged.after) };
    console.log(
      `    probed run (${probed!.median.toFixed(1)} ms, the probe's own load included): Node's start and end ${st.outside.toFixed(1)} ms (floor: node -e 0 ${base.toFixed(1)} ms) | ` +
        `loading and config ${st.load.toFixed(1)} ms (floor: 0) | the call ${st.call.toFixed(1)} ms (floor: adb shell true ${usbAdbShell!.median.toFixed(1)} ms) | printing and exit ${st.after.toFixed(1)} ms (floor: 0)`,
    );
    const round = (x: number) => Number(x.toFixed(2));
    emitReport(
      "cli-cold-start",
      [
        { measure: "farm --version vs node -e 0", instant: `${version!.ratio.toFixed(2)}x (${version!.median.toFixed(0)} ms)`, realistic: null, target: "<= 1.1x", pass: version!.ratio <= 1.1 },
        { measure: "farm devices vs node -e 0", instant: `${devices!.ratio.toFixed(2)}x (${devices!.median.toFixed(0)} ms)`, realistic: null, target: "<= 2x", pass: devices!.ratio <= 2 },
        {
          measure: "farm shell -- true vs node -e 0 + adb shell true",
          instant: `+${(shell!.median - adbShell!.median).toFixed(0)} ms over adb shell true`,
          realistic: round(usbRatio),
          profile: "pixel-usb",
          target: "<= 1.2x",
          pass: usbRatio <= 1.2,
        },
        {
          measure: "  its stages: node start / call / CLI's own (pixel-usb)",
          instant: `${base.toFixed(0)} / ${rpc.toFixed(0)} / ${cliOwn.toFixed(0)} ms (floors ${base.toFixed(0)} / ${usbAdbShell!.median.toFixed(0)} / 0)`,
          realistic: null,
          target: "",
          pass: null,
        },
        {
          measure: "  probed: node start+end / load+config / call / print+exit",
          instant: `${st.outside.toFixed(0)} / ${st.load.toFixed(0)} / ${st.call.toFixed(0)} / ${st.after.toFixed(0)} ms (floors ${base.toFixed(0)} / 0 / ${usbAdbShell!.median.toFixed(0)} / 0)`,
          realistic: null,
          target: "",
          pass: null,
        },
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
        pixelUsbShellRatio: round(usbRatio),
        pixelUsbShellRpcMedianMs: round(rpc),
        pixelUsbShellCliOwnMs: round(cliOwn),
        probedNodeStartEndMs: round(st.outside),
        probedLoadConfigMs: round(st.load),
        probedCallMs: round(st.call),
        probedPrintExitMs: round(st.after),
        ...(values.callgrind ? { instructions: counted } : {}),
        ...(baseline ? { baselineMedianMs: Object.fromEntries(baseCases.map((c) => [c.name, round(median(c.times))])) } : {}),
      },
    );
  } finally {
    await lab.stop();
  }
}

await main();
process.exit(0);
