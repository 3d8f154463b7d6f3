import { readdirSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { setPriority } from "node:os";
import { performance } from "node:perf_hooks";
import type { Worker as Thread } from "node:worker_threads";
import type tesseract from "tesseract.js";
import { ENG_DATA_GZIPPED, engDataDir } from "./eng-data.js";

/** A PNG to read: a file, or a reader of its bytes (a stored file in the database). */
export type PngSource = string | (() => Promise<Buffer>);

export interface OcrObservation {
  text: string;
  /** 0..1 */
  confidence: number;
  bounds: { left: number; top: number; right: number; bottom: number };
}

export interface OcrOutcome {
  /** Words in reading order. */
  observations: OcrObservation[];
  /** From the job leaving the queue to its result (a lazy worker start included). */
  durationMs: number;
}

export interface OcrPoolOptions {
  /** Tesseract workers at most (>= 1); each keeps one core busy while it works. */
  workers: number;
  /** Jobs that may wait beyond the running ones. */
  maxQueue: number;
  /**
   * The OCR threads' niceness (Linux), default OCR_NICE. A test hook: on a machine other jobs keep
   * busy, a niced thread gets a small share of a core by design, so tests of what OCR finds run at 0
   * and one test checks the default.
   */
  threadNice?: number;
}

export class OcrQueueFull extends Error {
  override name = "OcrQueueFull";
}

/** Niceness of an OCR thread: the server's threads win the CPU whenever both want it. */
const OCR_NICE = 10;

interface Job {
  pngPath: PngSource;
  resolve: (outcome: OcrOutcome) => void;
  reject: (reason: unknown) => void;
}

/**
 * A bounded pool of tesseract.js workers (one thread each, WebAssembly, no
 * network: language data and core come from node_modules), so OCR of
 * recorded screenshots runs off the action's critical path. Workers start on
 * first use and are reused; one that fails a job is dropped and replaced by
 * the next job that needs a worker.
 */
export class OcrPool {
  private readonly waiting: Job[] = [];
  private readonly idle: OcrThread[] = [];
  private readonly threads = new Set<OcrThread>();
  private readonly starting = new Set<Promise<OcrThread>>();
  private running = 0;
  private closed = false;

  constructor(private readonly opts: OcrPoolOptions) {
    if (!Number.isInteger(opts.workers) || opts.workers < 1) throw new RangeError(`workers must be an integer >= 1, got ${opts.workers}`);
    if (!Number.isInteger(opts.maxQueue) || opts.maxQueue < 0) throw new RangeError(`maxQueue must be an integer >= 0, got ${opts.maxQueue}`);
  }

  /** Recognizes words on a PNG (a file's path, or a reader of its bytes). Rejects with OcrQueueFull when maxQueue jobs already wait. */
  recognize(pngPath: PngSource): Promise<OcrOutcome> {
    return new Promise((resolve, reject) => {
      const job = { pngPath, resolve, reject };
      if (this.closed) reject(closedError());
      else if (this.running < this.opts.workers) void this.run(job);
      else if (this.waiting.length < this.opts.maxQueue) this.waiting.push(job);
      else reject(new OcrQueueFull(`OCR queue full: ${this.running} running, ${this.waiting.length} waiting`));
    });
  }

  /** Jobs queued + running. */
  get pending(): number {
    return this.waiting.length + this.running;
  }

  /** Terminates the workers; waiting and running jobs reject. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.waiting.splice(0)) job.reject(closedError());
    // A worker still starting registers its thread before it settles: loop until none is left.
    while (this.threads.size > 0 || this.starting.size > 0) {
      await Promise.allSettled([...[...this.threads].map((thread) => this.drop(thread)), ...this.starting]);
    }
  }

  private async run(job: Job): Promise<void> {
    this.running++;
    const started = performance.now();
    let thread: OcrThread | undefined;
    try {
      // Read first: a missing file should not cost a worker.
      const png = typeof job.pngPath === "string" ? await readFile(job.pngPath) : await job.pngPath();
      // Closed while reading: close() has already returned, so a worker started now would outlive it.
      if (this.closed) throw closedError();
      thread = this.idle.pop() ?? (await this.start());
      if (this.closed) throw closedError();
      const page = await thread.recognize(png);
      job.resolve({ observations: observations(page), durationMs: performance.now() - started });
    } catch (error) {
      // The wasm module's state after a failure is unknown (an abort is sticky): replace the worker.
      if (thread) void this.drop(thread);
      thread = undefined;
      job.reject(this.closed ? closedError() : error);
    } finally {
      this.running--;
      if (thread && this.closed) void this.drop(thread);
      else if (thread) this.idle.push(thread);
      this.next();
    }
  }

  private next(): void {
    while (!this.closed && this.running < this.opts.workers) {
      const job = this.waiting.shift();
      if (!job) return;
      void this.run(job);
    }
  }

  private async start(): Promise<OcrThread> {
    const starting = startThread((thread) => this.track(thread), this.opts.threadNice ?? OCR_NICE);
    this.starting.add(starting);
    try {
      return await starting;
    } finally {
      this.starting.delete(starting);
    }
  }

  private track(thread: OcrThread): void {
    this.threads.add(thread);
    // However it ends (dropped, closed, crashed while idle), an exited thread leaves the pool.
    thread.exited.catch(() => {
      this.threads.delete(thread);
      const at = this.idle.indexOf(thread);
      if (at >= 0) this.idle.splice(at, 1);
    });
  }

  private drop(thread: OcrThread): Promise<void> {
    return thread.terminate();
  }
}

const closedError = () => new Error("OcrPool is closed");

/** One tesseract.js worker and the thread it runs on, watched for a crash. */
class OcrThread {
  /** Rejects when the thread exits: tesseract.js would leave its calls pending forever. */
  readonly exited: Promise<never>;
  api: tesseract.Worker | undefined;

  constructor(private readonly thread: Thread) {
    let crash: unknown;
    // Without a listener an uncaught error in the thread would be rethrown in ours and end the process.
    thread.on("error", (error) => (crash = error));
    this.exited = new Promise<never>((_, reject) => thread.once("exit", (code) => reject(new Error(`OCR worker exited with code ${code}${crash === undefined ? "" : `: ${message(crash)}`}`))));
    this.exited.catch(() => {});
  }

  async recognize(png: Buffer): Promise<tesseract.Page> {
    if (!this.api) throw new Error("OCR worker not started");
    // Words with boxes come only with `blocks` since tesseract.js 6; plain text is not needed.
    const result = await Promise.race([this.api.recognize(png, {}, { blocks: true, text: false }).catch(rethrow), this.exited]);
    return result.data;
  }

  async terminate(): Promise<void> {
    await this.thread.terminate();
  }
}

/**
 * Starts a tesseract.js worker on local data. tesseract.js keeps its thread
 * to itself, so it is caught from process's "worker" event: in a fresh
 * macrotask the nextTick queue starts empty, so the first such event after
 * createWorker() is the thread it spawned.
 */
function startThread(spawned: (thread: OcrThread) => void, nice: number): Promise<OcrThread> {
  return loadTesseract().then((lib) => startThreadWith(lib, spawned, nice));
}

let tesseractLib: Promise<typeof tesseract> | undefined;
/**
 * tesseract.js, loaded by the first OCR call: a coordinator whose sessions
 * read no text never loads it (its modules are resident memory for the
 * process's life; docs/performance.md, round 15).
 */
function loadTesseract(): Promise<typeof tesseract> {
  tesseractLib ??= import("tesseract.js").then((m) => m.default);
  return tesseractLib;
}

function startThreadWith(tesseract: typeof import("tesseract.js"), spawned: (thread: OcrThread) => void, nice: number): Promise<OcrThread> {
  const langPath = engDataDir();
  let startFailed!: (reason: unknown) => void;
  const failure = new Promise<never>((_, reject) => (startFailed = reject));
  failure.catch(() => {});
  const spawning = new Promise<{ thread: OcrThread; ready: Promise<tesseract.Worker> }>((resolve) =>
    setImmediate(() => {
      const before = threadIds();
      const ready = tesseract.createWorker("eng", tesseract.OEM.LSTM_ONLY, {
        langPath,
        gzip: ENG_DATA_GZIPPED,
        // Read the data from langPath every time: nothing is written to a cache (or the cwd).
        cacheMethod: "none",
        // A failed load step reaches only this handler; without one tesseract.js throws in our thread.
        errorHandler: (error: unknown) => startFailed(error),
      });
      ready.catch(startFailed);
      lowerPriority(before, nice);
      // The event comes on the next tick.
      const adopt = (worker: Thread) => {
        const thread = new OcrThread(worker);
        spawned(thread);
        resolve({ thread, ready });
      };
      process.once("worker", adopt);
      // Should createWorker fail before it spawns, `adopt` must not take someone else's thread.
      failure.catch(() => process.off("worker", adopt));
    })
  );
  return Promise.race([spawning, failure]).then(async ({ thread, ready }) => {
    try {
      const api = await Promise.race([ready, failure, thread.exited]);
      // Screens are sparse text (labels, buttons, a clock), not pages with
      // columns. A screenshot's pHYs means nothing: a fixed dpi keeps results
      // independent of it (and tesseract quiet about "invalid resolution").
      const params = { tessedit_pageseg_mode: tesseract.PSM.SPARSE_TEXT, user_defined_dpi: "72" };
      await Promise.race([api.setParameters(params).catch(rethrow), failure, thread.exited]);
      thread.api = api;
      return thread;
    } catch (error) {
      await thread.terminate();
      throw asError(error);
    }
  }, rethrow);
}

/** Linux thread ids of this process (empty elsewhere). */
function threadIds(): Set<string> {
  try {
    return new Set(readdirSync("/proc/self/task"));
  } catch {
    return new Set();
  }
}

/**
 * Renices the one thread created since `before` (the Worker constructor
 * starts it synchronously). On Linux the nice value is per thread, so only
 * OCR yields to the server; elsewhere this does nothing.
 */
function lowerPriority(before: Set<string>, nice: number): void {
  if (process.platform !== "linux" || nice === 0) return;
  const fresh = [...threadIds()].filter((id) => !before.has(id));
  if (fresh.length !== 1) return;
  try {
    setPriority(Number(fresh[0]), nice);
  } catch {
    // Best effort: OCR still works at normal priority.
  }
}

/** Words in reading order: rows of lines top to bottom, lines in a row left to right. */
function observations(page: tesseract.Page): OcrObservation[] {
  const lines = (page.blocks ?? []).flatMap((block) => block.paragraphs.flatMap((paragraph) => paragraph.lines)).sort((a, b) => a.bbox.y0 - b.bbox.y0);
  // Sparse-text mode returns lines in no particular order; a line whose middle
  // is above the current row's bottom sits on that row.
  const rows: tesseract.Line[][] = [];
  let rowBottom = -Infinity;
  for (const line of lines) {
    const row = rows.at(-1);
    if (row && (line.bbox.y0 + line.bbox.y1) / 2 < rowBottom) {
      row.push(line);
      rowBottom = Math.max(rowBottom, line.bbox.y1);
    } else {
      rows.push([line]);
      rowBottom = line.bbox.y1;
    }
  }
  return rows
    .flatMap((row) => row.sort((a, b) => a.bbox.x0 - b.bbox.x0))
    .flatMap((line) => line.words)
    .map((word) => ({
      text: word.text.trim(),
      confidence: Math.min(1, Math.max(0, word.confidence / 100)),
      bounds: { left: word.bbox.x0, top: word.bbox.y0, right: word.bbox.x1, bottom: word.bbox.y1 },
    }))
    .filter((word) => word.text !== "");
}

/** tesseract.js rejects with strings. */
function asError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(`OCR failed: ${String(reason)}`);
}

function rethrow(reason: unknown): never {
  throw asError(reason);
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
