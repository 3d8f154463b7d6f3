/**
 * What a step's device log costs: the same recorded action on the same
 * phone, in the same run, interleaved, without and with `--capture
 * deviceLog` (logcat followed around the action, bounded by two markers,
 * masked and stored). Also with `elements.after` (a UIAutomator dump).
 *
 * On an instant phone (farm's own cost) and on one under devsim's pixel-usb
 * latency profile (what a user sees; target <= 1.2 for the device log).
 *
 *   node test/dist/bench/capture-cost.js [--actions 40] [--realistic-actions 10]
 */
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { startLab } from "../support/lab.js";
import { benchSessionClient } from "./bench-session-client.js";
import type { LatencyProfileName } from "../devsim/latency/latency-profiles.js";
import { addedMs, emitReport, round } from "./bench-report.js";
import { median, percentile } from "./proc-stats.js";

const { values } = parseArgs({ options: { actions: { type: "string", default: "40" }, "realistic-actions": { type: "string", default: "10" } } });

async function run(latency: LatencyProfileName, N: number) {
  const lab = await startLab(`bench-capture-cost-${latency}`, { logLevel: "info" });
  try {
    const { serial } = await lab.addDevice({ serialno: "CCOST0001", latency, latencySeed: 13 });
    const { devices, headers, start } = await benchSessionClient(lab, serial);
    headers["x-farm-session"] = await start({ name: "bench" });
    // A tap on the title bar: the same unchanged screen every time.
    const timed = async (tokens: string) => {
      headers["x-farm-capture"] = tokens;
      const t = performance.now();
      await devices.sendInput({ target: { serial }, kind: { case: "tap", value: { x: 5, y: 5 } } });
      return performance.now() - t;
    };
    const plain: number[] = [];
    const log: number[] = [];
    const tree: number[] = [];
    for (let i = 0; i < N + 5; i++) {
      const p = await timed("");
      const l = await timed("deviceLog");
      const e = await timed("elements.after");
      if (i < 5) continue;
      plain.push(p);
      log.push(l);
      tree.push(e);
    }
    const mp = median(plain);
    console.log(`phone latency profile: ${latency}; ${N} recorded taps each, interleaved`);
    console.log(`  recorded step:                  median ${mp.toFixed(2)} ms, p95 ${percentile(plain, 95).toFixed(2)} ms`);
    console.log(`  with --capture deviceLog:       median ${median(log).toFixed(2)} ms, p95 ${percentile(log, 95).toFixed(2)} ms; ratio ${(median(log) / mp).toFixed(2)} (target <= 1.2 with real device latency)`);
    console.log(`  with --capture elements.after:  median ${median(tree).toFixed(2)} ms; ratio ${(median(tree) / mp).toFixed(2)}`);
    return { plain: mp, log: median(log), tree: median(tree) };
  } finally {
    await lab.stop();
  }
}

const instant = await run("instant", Number(values.actions));
const usb = await run("pixel-usb", Number(values["realistic-actions"]));
emitReport(
  "capture-cost",
  [
    { measure: "recorded step with --capture deviceLog", instant: addedMs(instant.log - instant.plain), realistic: round(usb.log / usb.plain, 2), profile: "pixel-usb", target: "<= 1.2x (pixel-usb)", pass: usb.log / usb.plain <= 1.2 },
    { measure: "recorded step with --capture elements.after", instant: addedMs(instant.tree - instant.plain), realistic: round(usb.tree / usb.plain, 2), profile: "pixel-usb", target: "", pass: null },
  ],
  { instant, pixelUsb: usb },
);
process.exit(0);
