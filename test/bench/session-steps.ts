/**
 * Recorded sessions: the cost of a step. The same action on the same phone,
 * in the same run, interleaved: without a session, as a step of a session
 * (screenshots before and after, taken on the agent, stored by the
 * coordinator), and as a step of a session with OCR on. Then what 100 steps
 * store with an unchanged screen against a screen that changes every step.
 *
 * The step ratios are measured twice: on an instant phone (farm's own
 * cost) and on one under devsim's pixel-usb latency profile (what a user
 * sees; target <= 1.3 for a recorded step).
 *
 *   node test/dist/bench/session-steps.js [--actions 60] [--realistic-actions 8]
 */
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import type { SessionStep } from "@farm/shared/gen/farm/v1/session_service_pb";
import { benchSessionClient } from "./bench-session-client.js";
import { startLab } from "../support/lab.js";
import type { LatencyProfileName } from "../devsim/latency/latency-profiles.js";
import { addedMs, emitReport, round } from "./bench-report.js";
import { median, percentile } from "./proc-stats.js";

const { values } = parseArgs({ options: { actions: { type: "string", default: "60" }, "realistic-actions": { type: "string", default: "8" } } });

async function run(latency: LatencyProfileName, N: number, withStorage: boolean) {
  const lab = await startLab(`bench-session-steps-${latency}`, { logLevel: "info" });
  try {
    const { device, serial } = await lab.addDevice({ serialno: "STEPS0001", latency, latencySeed: 17 });
    const { devices, sessions, headers, start: startSession } = await benchSessionClient(lab, serial);
    const target = { serial };
    const start = (ocr: boolean) => startSession({ name: ocr ? "bench-ocr" : "bench", ocr });
    const plainId = await start(false);
    const ocrId = await start(true);

    // Settings' About screen shows ro.build.display.id: the bench changes it
    // between steps when it wants a new screen (outside any action).
    await devices.runShell({ target, command: "am start -n com.android.settings/.Settings\\$DeviceInfoSettingsActivity" });
    let build = 0;
    const newScreen = () => device.setProp("ro.build.display.id", `bench.${++build}`);
    // A tap on the title bar changes nothing on screen.
    const still = { target, kind: { case: "tap" as const, value: { x: 5, y: 5 } } };

    const timed = async (sessionId: string) => {
      headers["x-farm-session"] = sessionId;
      const t = performance.now();
      await devices.sendInput(still);
      const ms = performance.now() - t;
      headers["x-farm-session"] = "";
      return ms;
    };
    // 1. An unchanged screen: the same tap without a session and as a step.
    const bare: number[] = [];
    const recorded: number[] = [];
    for (let i = 0; i < N + 5; i++) {
      const b = await timed("");
      const r = await timed(plainId);
      if (i < 5) continue;
      bare.push(b);
      recorded.push(r);
    }
    // 2. A new screen before every step (so it is checked, sent, stored, and OCR'd when on), OCR off against on.
    const fresh: number[] = [];
    const withOcr: number[] = [];
    for (let i = 0; i < N + 5; i++) {
      newScreen();
      const f = await timed(plainId);
      newScreen();
      const o = await timed(ocrId);
      if (i < 5) continue;
      fresh.push(f);
      withOcr.push(o);
    }
    const mb = median(bare);
    const mr = median(recorded);
    const mf = median(fresh);
    const mo = median(withOcr);
    console.log(`phone latency profile: ${latency}; ${N} actions each, interleaved`);
    console.log(`  tap, no session:                     median ${mb.toFixed(2)} ms, p95 ${percentile(bare, 95).toFixed(2)} ms`);
    console.log(`  tap, recorded step, same screen:     median ${mr.toFixed(2)} ms, p95 ${percentile(recorded, 95).toFixed(2)} ms; ratio ${(mr / mb).toFixed(2)} (target <= 1.3 with real device latency)`);
    console.log(`  tap, recorded step, new screen:      median ${mf.toFixed(2)} ms, p95 ${percentile(fresh, 95).toFixed(2)} ms; ratio ${(mf / mb).toFixed(2)}`);
    console.log(`  tap, recorded, new screen, OCR on:   median ${mo.toFixed(2)} ms; ratio to OCR off ${(mo / mf).toFixed(2)} (target <= 1.10)`);

    const figures = { bare: mb, recorded: mr, fresh: mf, ocr: mo };
    if (!withStorage) return { figures };
    // 3. Storage per 100 steps: an unchanged screen against one that changes before every step.
    const storage = async (change: boolean) => {
      const id = await start(false);
      for (let i = 0; i < 100; i++) {
        if (change) newScreen();
        await timed(id);
      }
      const steps: SessionStep[] = [];
      let pageToken = "";
      do {
        const p = await sessions.listSessionSteps({ sessionId: id, pageToken, pageSize: 1000 });
        steps.push(...p.steps);
        pageToken = p.nextPageToken;
      } while (pageToken);
      const images = new Map<string, number>();
      let refs = 0;
      for (const s of steps) {
        for (const img of [s.before, s.after]) {
          if (!img?.sha256) continue;
          refs++;
          images.set(img.sha256, Number(img.size));
        }
      }
      const bytes = [...images.values()].reduce((a, b) => a + b, 0);
      return { refs, distinct: images.size, bytes, perImage: bytes / Math.max(1, images.size) };
    };
    const same = await storage(false);
    const changing = await storage(true);
    console.log(`storage per 100 steps (screenshots before and after each):`);
    console.log(`  unchanged screen: ${same.refs} screenshots, ${same.distinct} stored, ${(same.bytes / 1024).toFixed(1)} KiB`);
    console.log(`  screen changed before every step: ${changing.refs} screenshots, ${changing.distinct} stored, ${(changing.bytes / 1024).toFixed(1)} KiB (${(changing.perImage / 1024).toFixed(1)} KiB each)`);
    console.log(`  ratio changing / unchanged: ${(changing.bytes / Math.max(1, same.bytes)).toFixed(1)}`);
    return { figures, storage: { unchangedBytes: same.bytes, changingBytes: changing.bytes } };
  } finally {
    await lab.stop();
  }
}

const instant = await run("instant", Number(values.actions), true);
const usb = await run("pixel-usb", Number(values["realistic-actions"]), false);
const i = instant.figures;
const u = usb.figures;
emitReport(
  "session-steps",
  [
    { measure: "recorded step (same screen) vs plain tap", instant: addedMs(i.recorded - i.bare), realistic: round(u.recorded / u.bare, 2), profile: "pixel-usb", target: "<= 1.3x (pixel-usb)", pass: u.recorded / u.bare <= 1.3 },
    { measure: "recorded step (new screen) vs plain tap", instant: addedMs(i.fresh - i.bare), realistic: round(u.fresh / u.bare, 2), profile: "pixel-usb", target: "", pass: null },
    { measure: "  OCR on vs off (new screen)", instant: `${(i.ocr / i.fresh).toFixed(2)}x`, realistic: round(u.ocr / u.fresh, 2), profile: "pixel-usb", target: "<= 1.10x", pass: u.ocr / u.fresh <= 1.1 },
  ],
  { instant: i, pixelUsb: u, storage: instant.storage },
);
process.exit(0);
