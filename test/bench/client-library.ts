/**
 * The client library against the CLI per action: N device actions (`shell
 * true`) through @farm/client on one connection, against the same N as
 * one `farm shell -- true` process each (cli/dist/main.js, what a harness
 * that shells out to the CLI pays), on the same leased phone, interleaved
 * round by round so load drifts hit both alike. Once on an instant
 * simulated phone (farm's own cost: the CLI's start-up and connection per
 * action against one kept connection), once on a phone under the pixel-usb
 * latency profile (what a test harness sees).
 *
 *   node test/dist/bench/client-library.js [--actions 10] [--rounds 5]
 *
 * Targets: through the library an action costs at most 0.2x the CLI's per
 * action on the instant phone, and at most 0.5x on the pixel-usb phone
 * (where the phone's own time is in both).
 */
import { spawn } from "node:child_process";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { connect } from "@farm/client";
import { farmBin } from "../support/farm-process.js";
import { startLab } from "../support/lab.js";
import { emitReport, ms, round } from "./bench-report.js";
import { median } from "./proc-stats.js";

const { values } = parseArgs({ options: { actions: { type: "string", default: "10" }, rounds: { type: "string", default: "5" } } });
const ACTIONS = Number(values.actions);
const ROUNDS = Number(values.rounds);

/** One `farm shell -- true` process, to its exit. */
function cliShell(env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [farmBin, "shell", "--", "true"], { env, stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    proc.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    proc.once("error", reject);
    proc.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`farm shell exited ${code}: ${err}`))));
  });
}

async function main(): Promise<void> {
  const lab = await startLab("bench-client-library", { logLevel: "info" });
  try {
    const phones = [
      { name: "instant", ...(await lab.addDevice({ serialno: "LIBB0001" })) },
      { name: "pixel-usb", ...(await lab.addDevice({ serialno: "LIBB0002", latency: "pixel-usb", latencySeed: 7 })) },
    ];
    await using client = await connect({ env: lab.env });
    const rows = [];
    const details: Record<string, unknown> = {};
    for (const phone of phones) {
      await using lease = await client.acquire({ serial: phone.serial, ttlMs: 600_000 });
      const env: NodeJS.ProcessEnv = { ...process.env, ...lab.env, FARM_OUTPUT: "json", FARM_LEASE: lease.token, FARM_DEVICE: phone.serial };
      // Warm-up: the library's connection, the CLI's files in the page cache, the phone's shell.
      await lease.device.shell("true");
      await cliShell(env);
      const lib: number[] = [];
      const cli: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        let t = performance.now();
        for (let i = 0; i < ACTIONS; i++) {
          const res = await lease.device.shell("true");
          if (res.exitCode !== 0) throw new Error(`shell true exited ${res.exitCode}`);
        }
        lib.push((performance.now() - t) / ACTIONS);
        t = performance.now();
        for (let i = 0; i < ACTIONS; i++) await cliShell(env);
        cli.push((performance.now() - t) / ACTIONS);
      }
      const libMs = median(lib);
      const cliMs = median(cli);
      const ratio = libMs / cliMs;
      console.log(`${phone.name}: ${ACTIONS} x ${ROUNDS} actions: library ${ms(libMs)} per action, CLI per action ${ms(cliMs)}; ratio ${ratio.toFixed(3)}`);
      details[phone.name] = { libraryMs: round(libMs), cliMs: round(cliMs), ratio: round(ratio) };
      const target = phone.name === "instant" ? 0.2 : 0.5;
      rows.push({
        measure: `${ACTIONS} shell actions: library (one connection) / CLI per action, ${phone.name} phone`,
        instant: phone.name === "instant" ? `${ms(libMs)} vs ${ms(cliMs)}` : "",
        realistic: phone.name === "instant" ? null : round(ratio),
        ...(phone.name === "instant" ? {} : { profile: phone.name }),
        baseline: `farm shell -- true per action ${ms(cliMs)} (same run)`,
        target: `<= ${target}x`,
        pass: ratio <= target,
      });
    }
    emitReport("client-library", rows, details);
  } finally {
    await lab.stop();
  }
}

await main();
