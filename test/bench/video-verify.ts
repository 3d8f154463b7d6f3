/**
 * Managed video costs, each against a baseline from the same run:
 *
 * 1. Verification: the worker's full decode (2 decoder threads, 1 output
 *    thread, null output) of 60 s H.264 recordings at 1280x720 and
 *    1920x1080, as a fraction of the media duration (target <= 0.25), next
 *    to an unconstrained `ffmpeg -f null` decode of the same file.
 * 2. Stop latency: `farm evidence video stop` on a 30 s recording of a
 *    simulated phone, against the worker's own pull + probe + decode time.
 * 3. The worker's peak RSS over the whole session.
 *
 *   node test/dist/bench/video-verify.js [--seconds 60] [--fps 60] [--record-seconds 30]
 */
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { decodeVideo, mediaTools } from "@farm/agent/video/media-verify";
import { farm } from "../support/farm-process.js";
import { startLab } from "../support/lab.js";
import { makeTempDir } from "../support/temp-dir.js";
import { emitReport, round } from "./bench-report.js";
import { memoryMiB } from "./proc-stats.js";

const { values } = parseArgs({ options: { seconds: { type: "string", default: "60" }, fps: { type: "string", default: "60" }, "record-seconds": { type: "string", default: "30" } } });
const SECONDS = Number(values.seconds);
const FPS = Number(values.fps);
const RECORD_SECONDS = Number(values["record-seconds"]);
const tools = mediaTools();

async function decodeCost(): Promise<void> {
  const dir = await makeTempDir("bench-video");
  try {
    for (const [w, h] of [[1280, 720], [1920, 1080]] as const) {
      const file = join(dir.path, `${w}x${h}.mp4`);
      // Moving content, so every frame carries real work for the decoder.
      execFileSync(tools.ffmpeg, ["-v", "error", "-f", "lavfi", "-i", `testsrc2=size=${w}x${h}:rate=${FPS}`, "-t", String(SECONDS), "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", file]);
      const t0 = performance.now();
      const ours = await decodeVideo(file, tools);
      const oursMs = performance.now() - t0;
      if (ours.problem) throw new Error(`decode failed: ${ours.problem.message}`);
      const t1 = performance.now();
      const plain = spawnSync(tools.ffmpeg, ["-v", "error", "-i", file, "-f", "null", "-"]);
      const plainMs = performance.now() - t1;
      if (plain.status !== 0) throw new Error("baseline decode failed");
      console.log(
        `decode ${w}x${h} ${SECONDS} s @${FPS} fps: ${(oursMs / 1000).toFixed(2)} s for ${ours.frames} frames; ` +
          `ratio to media duration ${(oursMs / (SECONDS * 1000)).toFixed(3)} (target <= 0.25); ` +
          `unconstrained ffmpeg ${(plainMs / 1000).toFixed(2)} s (ratio ${(oursMs / plainMs).toFixed(2)})`,
      );
    }
  } finally {
    await dir.remove();
  }
}

async function stopLatency(): Promise<void> {
  const lab = await startLab("bench-video-stop");
  let tick: NodeJS.Timeout | undefined;
  try {
    const { device, serial } = await lab.addDevice({ serialno: "BENCHVID1" });
    tick = setInterval(() => device.state.screen.changed(), 50);
    const started = await farm(["evidence", "video", "start", "--device", serial, "--duration-seconds", String(RECORD_SECONDS + 30)], lab.env);
    if (started.code !== 0) throw new Error(`start failed: ${started.stdout}`);
    const id = String(started.json["sessionId"]);
    const inspect = await farm(["evidence", "video", "inspect", "--session", id], lab.env);
    const pid = (inspect.json["sessionFile"] as { worker: { pid: number } }).worker.pid;
    let peak = 0;
    const sample = setInterval(() => {
      try {
        // An exiting process (a zombie) has no VmHWM: NaN would stick in the max.
        const p = memoryMiB(pid).peakRss;
        if (Number.isFinite(p)) peak = Math.max(peak, p);
      } catch {
        /* exited */
      }
    }, 100);
    await new Promise((r) => setTimeout(r, RECORD_SECONDS * 1000));
    const t0 = performance.now();
    const stopped = await farm(["evidence", "video", "stop", "--session", id], lab.env);
    const stopMs = performance.now() - t0;
    clearInterval(sample);
    if (stopped.code !== 0) throw new Error(`stop failed: ${stopped.stdout}`);
    const out = join(lab.dir.path, "bundle");
    await farm(["evidence", "pull", id, "--output-dir", out], lab.env);
    const captures = JSON.parse(readFileSync(join(out, "captures.json"), "utf8")) as { captures: { video: { verification: { probeMs: number; decodeMs: number } } } };
    const v = captures.captures.video.verification;
    const manifest = JSON.parse(readFileSync(join(out, "manifest.json"), "utf8")) as { video: { mediaDurationMs: number; actualSize: { width: number; height: number } }; artifacts: { kind: string; bytes: number }[] };
    const bytes = manifest.artifacts.find((a) => a.kind === "video")?.bytes ?? 0;
    const work = v.probeMs + v.decodeMs;
    console.log(
      `stop of a ${RECORD_SECONDS} s recording (${manifest.video.actualSize.width}x${manifest.video.actualSize.height}, ${(bytes / 1024).toFixed(0)} KiB, media ${manifest.video.mediaDurationMs} ms): ` +
        `${stopMs.toFixed(0)} ms from stop request to complete; probe + full decode ${work.toFixed(0)} ms (ratio ${(stopMs / work).toFixed(2)}: the rest is Node start-up of the CLI, the recorder finishing its file, pull, upload and RPCs)`,
    );
    console.log(`worker peak RSS: ${peak.toFixed(1)} MiB`);
    emitReport(
      "video-verify",
      [
        { measure: `video stop to complete (${RECORD_SECONDS} s recording)`, instant: `${stopMs.toFixed(0)} ms`, realistic: null, target: "", pass: null },
        { measure: "  of which probe + full decode", instant: `${work.toFixed(0)} ms`, realistic: null, target: "", pass: null },
      ],
      { stopMs: round(stopMs, 1), probeDecodeMs: round(work, 1), workerPeakRssMiB: round(peak, 1) },
    );
  } finally {
    clearInterval(tick);
    await lab.stop();
  }
}

await decodeCost();
await stopLatency();
