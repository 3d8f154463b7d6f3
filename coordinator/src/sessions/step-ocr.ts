import type { Logger } from "@farm/shared/log";
import { createRedactor, type Redactor } from "@farm/shared/redaction/redactor";
import { OcrQueueFull, type OcrOutcome, type PngSource } from "./ocr/ocr-pool.js";
import type { SessionImageStore } from "./session-image-store.js";
import type { SessionSteps, StepOcrRecord } from "./session-steps.js";
import type { StepOcrQueue } from "./step-recorder.js";
import type { Sessions } from "./sessions.js";

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
    /** Whose secrets mask what a restart left pending; absent, pending steps are read unmasked. */
    private readonly sessions?: Sessions,
  ) {}

  /** `mask`: the session's secrets, masked in the text read before it is stored (a screen may show one). */
  queue(sessionId: string, sequence: number, sha256: string, mask?: Redactor): void {
    void this.recognize(sha256)
      .then(
        (o): StepOcrRecord => ({
          status: "done",
          observations: mask ? o.observations.map((x) => ({ ...x, text: mask.text(x.text) })) : o.observations,
          durationMs: Math.round(o.durationMs),
        }),
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
      const mask = await this.maskOf(s.sessionId);
      if (mask === "lost") {
        await this.store(s.sessionId, s.sequence, { status: "skipped", observations: [], error: "the session's secrets were lost in a restart: what OCR reads could not be masked" });
      } else if (sha) {
        this.queue(s.sessionId, s.sequence, sha, mask);
        n++;
      } else {
        await this.store(s.sessionId, s.sequence, { status: "skipped", observations: [], error: "no before screenshot" });
      }
    }
    return n;
  }

  /** The masking of a session's secrets: none to mask, a redactor, or "lost" (it has secrets this process does not hold). */
  private async maskOf(sessionId: string): Promise<Redactor | undefined | "lost"> {
    const row = await this.sessions?.find(sessionId);
    if (!row || row.secretNames.length === 0 || !this.sessions) return undefined;
    try {
      return createRedactor({ secrets: this.sessions.secretsOf(row) });
    } catch {
      return "lost";
    }
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
