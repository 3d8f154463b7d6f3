/**
 * What a step's device log costs: the same recorded action on the same
 * phone, in the same run, interleaved, without and with `--capture
 * deviceLog` (logcat followed around the action, bounded by two markers,
 * masked and stored). Also with `elements.after` (a UIAutomator dump).
 *
 *   node test/dist/bench/capture-cost.js [--actions 40] [--latency-ms 0]
 */
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { startLab } from "../support/lab.js";
import { benchSessionClient } from "./bench-session-client.js";
import { median, percentile } from "./proc-stats.js";

const { values } = parseArgs({ options: { actions: { type: "string", default: "40" }, "latency-ms": { type: "string", default: "0" } } });
const N = Number(values.actions);
const LATENCY = Number(values["latency-ms"]);

async function main(): Promise<void> {
  const lab = await startLab("bench-capture-cost");
  try {
    const { device, serial } = await lab.addDevice({ serialno: "CCOST0001" });
    const { devices, headers, start } = await benchSessionClient(lab, serial);
    headers["x-farm-session"] = await start({ name: "bench" });
    if (LATENCY > 0) device.faults.set({ latencyMs: LATENCY });
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
    console.log(`phone packet latency: ${LATENCY} ms (devsim ${LATENCY === 0 ? "instant" : "latencyMs fault"}); ${N} recorded taps each, interleaved`);
    console.log(`  recorded step:                  median ${mp.toFixed(2)} ms, p95 ${percentile(plain, 95).toFixed(2)} ms`);
    console.log(`  with --capture deviceLog:       median ${median(log).toFixed(2)} ms, p95 ${percentile(log, 95).toFixed(2)} ms; ratio ${(median(log) / mp).toFixed(2)} (target <= 1.2 with real device latency)`);
    console.log(`  with --capture elements.after:  median ${median(tree).toFixed(2)} ms; ratio ${(median(tree) / mp).toFixed(2)}`);
  } finally {
    await lab.stop();
  }
}

await main();
