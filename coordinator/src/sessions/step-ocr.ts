import type { Logger } from "@farm/shared/log";
import { OcrQueueFull, type OcrOutcome, type PngSource } from "./ocr/ocr-pool.js";
import type { SessionImageStore } from "./session-image-store.js";
import type { SessionSteps, StepOcrRecord } from "./session-steps.js";
import type { StepOcrQueue } from "./step-recorder.js";

/** Results kept per screenshot, so an unchanged screen is read once. */
const MEMO = 256;

/**
 * OCR of steps' before screenshots, after the step is stored and its
 * caller answered: the pool bounds how many run and wait, and a step whose
 * OCR cannot be queued says so (skipped) instead of waiting forever.
 */
export class StepOcr implements StepOcrQueue {
  private readonly memo = new Map<string, Promise<OcrOutcome>>();

  constructor(
    private readonly pool: { recognize(png: PngSource): Promise<OcrOutcome> },
    private readonly steps: SessionSteps,
    private readonly images: SessionImageStore,
    private readonly log: Logger,
  ) {}

  queue(sessionId: string, sequence: number, sha256: string): void {
    void this.recognize(sha256)
      .then(
        (o): StepOcrRecord => ({ status: "done", observations: o.observations, durationMs: Math.round(o.durationMs) }),
        (err: unknown): StepOcrRecord => {
          const full = err instanceof OcrQueueFull;
          if (!full) this.log.warn("OCR of a step failed", { sessionId, sequence, error: (err as Error).message });
          return { status: full ? "skipped" : "failed", observations: [], error: full ? "the OCR queue was full" : (err as Error).message };
        },
      )
      .then((ocr) => this.store(sessionId, sequence, ocr));
  }

  /** Queues again what a restart left pending. */
  async resume(): Promise<number> {
    let n = 0;
    for (const s of await this.steps.pendingOcr()) {
      const sha = s.view.before?.sha256;
      if (sha) {
        this.queue(s.sessionId, s.sequence, sha);
        n++;
      } else {
        await this.store(s.sessionId, s.sequence, { status: "skipped", observations: [], error: "no before screenshot" });
      }
    }
    return n;
  }

  /** Stores a step's OCR; a failure is logged (the step stays pending, and a restart queues it again). */
  private async store(sessionId: string, sequence: number, ocr: StepOcrRecord): Promise<void> {
    try {
      await this.steps.setOcr(sessionId, sequence, ocr);
    } catch (err) {
      this.log.error("a step's OCR could not be stored", { sessionId, sequence, error: (err as Error).message });
    }
  }

  private recognize(sha256: string): Promise<OcrOutcome> {
    const known = this.memo.get(sha256);
    if (known) {
      // Most recently used last: the oldest is dropped first.
      this.memo.delete(sha256);
      this.memo.set(sha256, known);
      return known;
    }
    const p = this.pool.recognize(() => this.images.bytesOf(sha256));
    this.memo.set(sha256, p);
    p.catch(() => this.memo.delete(sha256));
    if (this.memo.size > MEMO) this.memo.delete(this.memo.keys().next().value as string);
    return p;
  }
}
