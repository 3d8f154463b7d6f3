/**
 * OCR cost of one 1080x2400 phone frame through the coordinator's OcrPool (1
 * worker, real tesseract.js): median ms per frame over N different devsim
 * screens after a warm-up, against decoding the same PNGs with sharp in the
 * same run (ratio), plus the worker's start, CPU per frame, RSS and the main
 * thread's event-loop delay while OCR runs. Prints; asserts nothing.
 *
 *   node test/dist/bench/ocr-frame.js [--frames 5]
 */
import { writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import type { Sharp, SharpOptions } from "sharp";
import { OcrPool } from "@farm/coordinator/sessions/ocr/ocr-pool";
import { DEMO_PACKAGE, DEVICE_PROFILES, DeviceState, defaultProperties } from "../devsim/index.js";
import { makeTempDir } from "../support/temp-dir.js";
import { emitReport } from "./bench-report.js";
import { median, memoryMiB } from "./proc-stats.js";

const { values } = parseArgs({ options: { frames: { type: "string", default: "5" } } });
const FRAMES = Number(values.frames);

const sharp = createRequire(import.meta.url)("sharp") as (input?: Buffer | SharpOptions) => Sharp;

/** Scenes that differ, so every frame is new work (launcher, settings pages, the demo app). */
const SCENES: Array<(phone: DeviceState) => void> = [
  (p) => p.screen.home(),
  (p) => p.screen.start("com.android.settings"),
  (p) => {
    p.screen.tap(540, 350); // the "Network & internet" row
  },
  (p) => {
    p.screen.back();
    p.screen.tap(540, 520); // the "Display" row
  },
  (p) => {
    p.screen.home();
    p.screen.start(DEMO_PACKAGE);
  },
  (p) => p.screen.start("com.android.settings", ".Settings$DeviceInfoSettingsActivity"),
];

async function main(): Promise<void> {
  const dir = await makeTempDir("bench-ocr");
  const profile = DEVICE_PROFILES[0]!;
  const phone = new DeviceState(defaultProperties(profile, "BENCH0001"), undefined, { width: profile.width, height: profile.height, density: profile.density });
  const pool = new OcrPool({ workers: 1, maxQueue: FRAMES + 2 });
  try {
    const { width, height } = phone.display.logicalSize;
    const frames: Array<{ path: string; png: Buffer }> = [];
    for (let i = 0; i < FRAMES + 1; i++) {
      SCENES[i % SCENES.length]!(phone);
      const png = await phone.renderer.png();
      const path = join(dir.path, `frame-${i}.png`);
      await writeFile(path, png);
      frames.push({ path, png });
    }
    const blank = join(dir.path, "blank.png");
    await writeFile(blank, await sharp({ create: { width, height, channels: 3, background: "#fafafa" } }).png().toBuffer());

    const rssBefore = memoryMiB(process.pid).rss;
    let t0 = performance.now();
    const first = await pool.recognize(frames[0]!.path); // warm-up: starts the worker
    const firstMs = performance.now() - t0;

    const ocrMs: number[] = [];
    const cpuMs: number[] = [];
    const decodeMs: number[] = [];
    const words: number[] = [first.observations.length];
    const loop = monitorEventLoopDelay({ resolution: 1 });
    for (const frame of frames.slice(1)) {
      const cpu = process.cpuUsage();
      t0 = performance.now();
      loop.enable();
      const outcome = await pool.recognize(frame.path);
      loop.disable();
      ocrMs.push(performance.now() - t0);
      const used = process.cpuUsage(cpu);
      cpuMs.push((used.user + used.system) / 1000);
      words.push(outcome.observations.length);

      t0 = performance.now();
      await sharp(frame.png).raw().toBuffer();
      decodeMs.push(performance.now() - t0);
    }
    const blankMs: number[] = [];
    for (let i = 0; i < 3; i++) {
      t0 = performance.now();
      await pool.recognize(blank);
      blankMs.push(performance.now() - t0);
    }
    const rssAfter = memoryMiB(process.pid).rss;

    const ocr = median(ocrMs);
    const decode = median(decodeMs);
    const report = {
      frame: `${width}x${height}`,
      frames: FRAMES,
      ocrMedianMs: Number(ocr.toFixed(1)),
      ocrCpuMedianMs: Number(median(cpuMs).toFixed(1)),
      pngDecodeMedianMs: Number(decode.toFixed(1)),
      ratioVsDecode: Number((ocr / decode).toFixed(1)),
      blankMedianMs: Number(median(blankMs).toFixed(1)),
      ratioVsBlank: Number((ocr / median(blankMs)).toFixed(2)),
      firstCallMs: Number(firstMs.toFixed(0)),
      wordsPerFrame: words,
      rssGrowthMiB: Number((rssAfter - rssBefore).toFixed(0)),
      loopDelayP99Ms: Number((loop.percentile(99) / 1e6).toFixed(1)),
    };
    console.log(`OCR of a ${width}x${height} devsim frame, OcrPool with 1 worker, median of ${FRAMES} different frames after a warm-up:`);
    console.log(`  OCR                        ${ocr.toFixed(0)} ms/frame (process CPU ${median(cpuMs).toFixed(0)} ms/frame)`);
    console.log(`  sharp PNG decode, same PNG ${decode.toFixed(1)} ms   ratio OCR/decode ${report.ratioVsDecode}`);
    console.log(`  blank frame OCR            ${median(blankMs).toFixed(0)} ms   ratio OCR/blank ${report.ratioVsBlank}`);
    console.log(`  first call (worker start)  ${firstMs.toFixed(0)} ms;  words per frame ${words.join(", ")}`);
    console.log(`  RSS +${report.rssGrowthMiB} MiB with the worker; main-thread event-loop delay p99 ${report.loopDelayP99Ms} ms while OCR runs`);
    emitReport("ocr-frame", [{ measure: "OCR of a devsim frame, per frame", instant: `${ocr.toFixed(0)} ms`, realistic: null, target: "", pass: null }], report);
  } finally {
    await pool.close();
    await phone.dispose();
    await dir.remove();
  }
}

await main();
process.exit(0);
