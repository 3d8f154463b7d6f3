import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Worker as Thread } from "node:worker_threads";
import type { Sharp, SharpOptions } from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OcrPool, OcrQueueFull, type OcrObservation } from "./ocr-pool.js";

// Real tesseract.js on screens drawn with sharp (installed for the agent and
// the tests; the pool itself does not use it). sharp is CommonJS.
const sharp = createRequire(import.meta.url)("sharp") as (input?: Buffer | SharpOptions, options?: SharpOptions) => Sharp;

const WIDTH = 1080;
const HEIGHT = 2400;
type Box = OcrObservation["bounds"];

/** Labels drawn at known places, like a phone's settings screen. */
const LABELS = [
  { text: "Settings", x: 48, y: 170, size: 60, fill: "#202124" },
  { text: "Network", x: 150, y: 420, size: 48, fill: "#202124" },
  { text: "Display", x: 150, y: 580, size: 48, fill: "#202124" },
  { text: "Sign in", x: 120, y: 797, size: 48, fill: "#174ea6" },
];

const svg = (body: string) => `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}"><rect width="${WIDTH}" height="${HEIGHT}" fill="#fafafa"/>${body}</svg>`;
const label = (l: (typeof LABELS)[number]) => `<text x="${l.x}" y="${l.y}" font-family="sans-serif" font-size="${l.size}" fill="${l.fill}">${l.text}</text>`;
const SCREEN = svg(
  [
    `<rect width="${WIDTH}" height="63" fill="#202124"/>`,
    `<rect y="63" width="${WIDTH}" height="168" fill="#e8eaed"/>`,
    `<circle cx="80" cy="404" r="32" fill="#607d8b"/>`,
    `<rect x="0" y="480" width="${WIDTH}" height="2" fill="#e0e0e0"/>`,
    `<circle cx="80" cy="564" r="32" fill="#607d8b"/>`,
    `<rect x="48" y="700" width="984" height="140" rx="70" fill="#d2e3fc"/>`,
    ...LABELS.map(label),
  ].join(""),
);

let dir: string;
let screenPng: string;
let blankPng: string;
/** A small blank image: work for a worker where what it reads does not matter (a tenth of the CPU of a phone-sized one). */
let smallBlankPng: string;
/** Where each label's ink really is: the label drawn alone, trimmed to its pixels. */
const truth = new Map<string, Box>();

async function render(file: string, image: string): Promise<string> {
  const path = join(dir, file);
  await writeFile(path, await sharp(Buffer.from(image), { density: 72 }).png().toBuffer());
  return path;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-ocr-pool-"));
  screenPng = await render("screen.png", SCREEN);
  blankPng = await render("blank.png", svg(""));
  smallBlankPng = join(dir, "small-blank.png");
  await writeFile(smallBlankPng, await sharp({ create: { width: 108, height: 240, channels: 3, background: "#fafafa" } }).png().toBuffer());
  for (const l of LABELS) {
    const { info } = await sharp(Buffer.from(svg(label(l))), { density: 72 }).trim({ background: "#fafafa", threshold: 40 }).toBuffer({ resolveWithObject: true });
    const left = -(info.trimOffsetLeft ?? 0);
    const top = -(info.trimOffsetTop ?? 0);
    truth.set(l.text, { left, top, right: left + info.width, bottom: top + info.height });
  }
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Every thread started in this process while the tests run (tesseract.js starts one per worker). */
const spawned: Thread[] = [];
const onWorker = (thread: Thread) => spawned.push(thread);
beforeAll(() => void process.on("worker", onWorker));
afterAll(() => void process.off("worker", onWorker));

/** The threads spawned while `body` runs. */
async function spawnedDuring<T>(body: () => Promise<T>): Promise<{ result: T; threads: Thread[] }> {
  const from = spawned.length;
  const result = await body();
  return { result, threads: spawned.slice(from) };
}

/**
 * Every test but the one about the threads' niceness runs them at 0: a niced thread gets a small
 * share of a core whenever other jobs keep the machine busy (by design: the server's threads win),
 * and at load 30-40 these tests' few CPU seconds of OCR then took over their 60 s.
 */
const UN_NICED = { threadNice: 0 };

/** Overlaps the expected box, and its centre lies in that box grown by a few pixels. */
function matches(found: Box, expected: Box, slack = 6): boolean {
  const overlap = Math.max(0, Math.min(found.right, expected.right) - Math.max(found.left, expected.left)) * Math.max(0, Math.min(found.bottom, expected.bottom) - Math.max(found.top, expected.top));
  const cx = (found.left + found.right) / 2;
  const cy = (found.top + found.bottom) / 2;
  return overlap > 0 && cx >= expected.left - slack && cx <= expected.right + slack && cy >= expected.top - slack && cy <= expected.bottom + slack;
}

/** The nice value of each of this process's threads (Linux). */
function niceOfThreads(): number[] {
  return readdirSync("/proc/self/task").map((tid) => {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
  });
}

describe("OcrPool", () => {
  it("finds every label's words where they were drawn, starting one worker lazily and reusing it", async () => {
    const { result: pool, threads: atConstruction } = await spawnedDuring(async () => new OcrPool({ workers: 2, maxQueue: 4, ...UN_NICED }));
    expect(atConstruction).toHaveLength(0);
    try {
      const { result, threads } = await spawnedDuring(async () => [await pool.recognize(screenPng), await pool.recognize(blankPng)] as const);
      const [screen, blank] = result;
      expect(threads).toHaveLength(1);
      for (const l of LABELS) {
        for (const word of l.text.split(" ")) {
          const found = screen.observations.filter((o) => o.text === word);
          expect(found.length, `"${word}" in ${JSON.stringify(screen.observations.map((o) => o.text))}`).toBeGreaterThan(0);
          expect(found.some((o) => matches(o.bounds, truth.get(l.text)!)), `${word}: ${JSON.stringify(found)} vs ${JSON.stringify(truth.get(l.text))}`).toBe(true);
          for (const o of found) expect(o.confidence > 0 && o.confidence <= 1).toBe(true);
        }
      }
      // Reading order: top to bottom, left to right.
      const order = screen.observations.map((o) => o.text).filter((t) => ["Settings", "Network", "Display", "Sign", "in"].includes(t));
      expect(order).toEqual(["Settings", "Network", "Display", "Sign", "in"]);
      expect(screen.durationMs).toBeGreaterThan(0);
      // A blank screen has no words, and no error.
      expect(blank.observations).toEqual([]);
    } finally {
      await pool.close();
    }
  }, 60_000);

  it.runIf(process.platform === "linux")("runs its OCR thread at nice 10 by default, so the server's threads win the CPU", async () => {
    const pool = new OcrPool({ workers: 1, maxQueue: 1 });
    const before = niceOfThreads();
    expect(before).not.toContain(10);
    const spawnedThread = new Promise<void>((resolve) => process.once("worker", () => resolve()));
    const job = pool.recognize(blankPng).catch((error: unknown) => error);
    // The thread is reniced as it is created, before this event; its niced work is not waited for.
    await spawnedThread;
    expect(niceOfThreads()).toContain(10);
    await pool.close();
    expect(String(await job)).toMatch(/closed/);
  }, 60_000);

  it("rejects the call beyond the running and maxQueue waiting ones with OcrQueueFull", async () => {
    const pool = new OcrPool({ workers: 1, maxQueue: 1, ...UN_NICED });
    try {
      const calls = [pool.recognize(smallBlankPng), pool.recognize(smallBlankPng), pool.recognize(smallBlankPng)];
      expect(pool.pending).toBe(2);
      const settled = await Promise.allSettled(calls);
      expect(settled.map((s) => s.status)).toEqual(["fulfilled", "fulfilled", "rejected"]);
      const third = settled[2]!;
      expect(third.status === "rejected" && third.reason instanceof OcrQueueFull).toBe(true);
      expect(pool.pending).toBe(0);
    } finally {
      await pool.close();
    }
  }, 60_000);

  it("close() rejects running and waiting jobs, terminates the workers and refuses new jobs", async () => {
    const pool = new OcrPool({ workers: 1, maxQueue: 2, ...UN_NICED });
    const { result: settled, threads } = await spawnedDuring(async () => {
      const settled = Promise.allSettled([pool.recognize(screenPng), pool.recognize(screenPng), pool.recognize(screenPng)]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      await pool.close();
      return settled;
    });
    expect(settled.map((s) => s.status)).toEqual(["rejected", "rejected", "rejected"]);
    for (const s of settled) expect(s.status === "rejected" && String(s.reason)).toMatch(/closed/);
    expect(pool.pending).toBe(0);
    await expect(pool.recognize(screenPng)).rejects.toThrow(/closed/);
    expect(threads).toHaveLength(1);
    expect(threads.map((thread) => thread.threadId)).toEqual([-1]); // -1: exited
  }, 60_000);

  it("close() during a job's read of its image starts no worker for it afterwards", async () => {
    // Under load, the 50 ms before close() in the test above can end before the
    // first job has read its file: that job then started a worker after close().
    const pool = new OcrPool({ workers: 1, maxQueue: 2, ...UN_NICED });
    let release!: () => void;
    const read = new Promise<void>((resolve) => (release = resolve));
    const { result: settled, threads } = await spawnedDuring(async () => {
      const job = pool.recognize(async () => {
        await read;
        return readFileSync(screenPng);
      });
      await pool.close();
      release();
      return Promise.allSettled([job]);
    });
    expect(settled[0]!.status === "rejected" && String(settled[0]!.reason)).toMatch(/closed/);
    expect(pool.pending).toBe(0);
    expect(threads).toHaveLength(0);
  }, 60_000);

  it("fails only the job whose worker throws, and replaces that worker", async () => {
    const pool = new OcrPool({ workers: 1, maxQueue: 2, ...UN_NICED });
    try {
      // Read before a worker is taken: no thread for a missing file.
      const { result: missing, threads: none } = await spawnedDuring(() => pool.recognize(join(dir, "missing.png")).catch((error: unknown) => error));
      expect(missing).toMatchObject({ code: "ENOENT" });
      expect(none).toHaveLength(0);
      // Not an image: tesseract throws inside the worker, which is then dropped.
      const notPng = join(dir, "not.png");
      await writeFile(notPng, "not a png");
      const { result: thrown, threads: first } = await spawnedDuring(() => pool.recognize(notPng).catch((error: unknown) => error));
      expect(thrown).toBeInstanceOf(Error);
      const { result: blank, threads: second } = await spawnedDuring(() => pool.recognize(smallBlankPng));
      expect(blank.observations).toEqual([]);
      expect(first.map((thread) => thread.threadId)).toEqual([-1]);
      expect(second).toHaveLength(1);
    } finally {
      await pool.close();
    }
  }, 60_000);

  // Split from the test above (one pool each): three worker starts and two phone-sized reads in one
  // test took over 60 s at load 25.
  it("fails only the job whose worker dies in the middle of a recognition, and replaces that worker", async () => {
    const pool = new OcrPool({ workers: 1, maxQueue: 2, ...UN_NICED });
    try {
      const { result: blank, threads: first } = await spawnedDuring(() => pool.recognize(smallBlankPng));
      expect(blank.observations).toEqual([]);
      expect(first).toHaveLength(1);
      const worker = first[0]!;
      // Killed once the recognition is handed to the thread (tesseract.js posts it as a message), not after a wall-clock wait that a fast thread outran.
      const handedOver = new Promise<void>((resolve) => {
        const post = worker.postMessage.bind(worker);
        worker.postMessage = (message: unknown, transfer?: Parameters<Thread["postMessage"]>[1]) => {
          if ((message as { action?: unknown } | null)?.action === "recognize") resolve();
          post(message, transfer);
        };
      });
      const job = pool.recognize(screenPng).catch((error: unknown) => error);
      await handedOver;
      await worker.terminate();
      expect(String(await job)).toMatch(/OCR worker exited/);
      const { result: after, threads: second } = await spawnedDuring(() => pool.recognize(screenPng));
      expect(after.observations.map((o) => o.text)).toContain("Network");
      expect(second).toHaveLength(1);
    } finally {
      await pool.close();
    }
  }, 60_000);
});
