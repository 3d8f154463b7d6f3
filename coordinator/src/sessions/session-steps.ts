import { EventEmitter } from "node:events";
import { decodePageToken, pageSizeOf, readPage, type Page, type PageRequest } from "../paging.js";
import type { OcrObservation } from "./ocr/ocr-pool.js";
import type { SessionRow } from "./session-store.js";
import type { SessionImageRow, SessionStepStore, StepRow } from "./session-step-store.js";
import { readStepRecord, type StepRecordV1, type StepRecordV2, type StepView } from "./step-record.js";

/** The OCR of a step's before screenshot, stored beside its record. */
export interface StepOcrRecord {
  status: "pending" | "done" | "failed" | "skipped";
  observations: OcrObservation[];
  error?: string;
  durationMs?: number;
}

/** A step as readers get it: the record read whatever its version, and its OCR. */
export interface StoredStep {
  sessionId: string;
  sequence: number;
  view: StepView;
  ocr: StepOcrRecord | null;
  createdAt: number;
}

export interface StepEvents {
  /** A step was appended, or its OCR changed. */
  step: [step: StoredStep];
}

/** How many of a session's screenshots the agent is told it need not upload again. */
const KNOWN_IMAGES = 32;

/**
 * Sessions' timelines. Sequence numbers are handed out in the order the
 * coordinator routes steps; a step is stored when its answer is in, so a
 * step whose record was never written (the coordinator stopped mid-call)
 * leaves a gap rather than a made-up record.
 */
export class SessionSteps {
  readonly events = new EventEmitter<StepEvents>();
  private readonly next = new Map<string, number>();
  /** A session's stored maximum being read: concurrent first reserves share the read. */
  private readonly seeding = new Map<string, Promise<number>>();

  constructor(
    private readonly store: SessionStepStore,
    private readonly now: () => number = Date.now,
  ) {}

  /** The next sequence number of a session's timeline. */
  async reserve(sessionId: string): Promise<number> {
    if (!this.next.has(sessionId)) {
      let seed = this.seeding.get(sessionId);
      if (!seed) {
        seed = this.store.maxSequence(sessionId);
        this.seeding.set(sessionId, seed);
        const done = () => void this.seeding.delete(sessionId);
        seed.then(done, done);
      }
      const max = await seed;
      // The first reserve to wake seeds the counter; the others count on from it.
      if (!this.next.has(sessionId)) this.next.set(sessionId, max);
    }
    const n = (this.next.get(sessionId) as number) + 1;
    this.next.set(sessionId, n);
    return n;
  }

  /** Drops what is kept in memory for a session that ended (its late steps still store). */
  forget(sessionId: string): void {
    this.next.delete(sessionId);
  }

  /**
   * Stores one step. `failed` counts it on the session; `ocr` leaves its
   * OCR pending (the caller queues it). Returns the stored step and the
   * session as counted, or undefined when the session does not exist.
   */
  async append(
    sessionId: string,
    sequence: number,
    record: StepRecordV2 | StepRecordV1,
    opts: { failed: boolean; ocr: StepOcrRecord | null },
  ): Promise<{ step: StoredStep; session: SessionRow } | undefined> {
    const row: StepRow = { sessionId, sequence, record: JSON.stringify(record), ocr: opts.ocr ? ocrJson(opts.ocr) : null, createdAt: this.now() };
    // The step and the session's counts are one transaction (the store's append).
    const session = await this.store.append(row, opts.failed);
    if (!session) return undefined;
    const step = toStored(row);
    this.events.emit("step", step);
    return { step, session };
  }

  async setOcr(sessionId: string, sequence: number, ocr: StepOcrRecord): Promise<StoredStep | undefined> {
    const row = await this.store.setOcr(sessionId, sequence, ocrJson(ocr));
    if (!row) return undefined;
    const step = toStored(row);
    this.events.emit("step", step);
    return step;
  }

  async get(sessionId: string, sequence: number): Promise<StoredStep | undefined> {
    const row = await this.store.get(sessionId, sequence);
    return row && toStored(row);
  }

  /** One page of a timeline, oldest first. */
  async listPage(sessionId: string, page: PageRequest): Promise<Page<StoredStep>> {
    const scope = { list: "session-steps", filter: { sessionId } };
    const shape = ["number"] as const;
    // A bad token or size is refused before the store is read; readPage then cuts the page from the rows read.
    const size = pageSizeOf(page.pageSize);
    const after = decodePageToken(page.pageToken, scope, shape);
    const rows = (await this.store.listAfter(sessionId, after ? after[0] : 0, size + 1)).map(toStored);
    return readPage(page, scope, shape, (s: StoredStep) => [s.sequence] as const, () => rows);
  }

  /** Steps whose OCR a restart left pending. */
  async pendingOcr(limit = 1000): Promise<StoredStep[]> {
    return (await this.store.pendingOcr(limit)).map(toStored);
  }

  addImage(row: SessionImageRow): Promise<void> {
    return this.store.addImage(row);
  }

  image(sessionId: string, sha256: string): Promise<SessionImageRow | undefined> {
    return this.store.image(sessionId, sha256);
  }

  knownImages(sessionId: string): Promise<string[]> {
    return this.store.recentImages(sessionId, KNOWN_IMAGES);
  }
}

// Status first: pendingOcr() finds pending steps by this prefix.
function ocrJson(o: StepOcrRecord): string {
  return JSON.stringify({ status: o.status, observations: o.observations, error: o.error, durationMs: o.durationMs });
}

function toStored(row: StepRow): StoredStep {
  let ocr: StepOcrRecord | null = null;
  if (row.ocr !== null) {
    try {
      ocr = JSON.parse(row.ocr) as StepOcrRecord;
    } catch {
      ocr = { status: "failed", observations: [], error: "the stored OCR result is not JSON" };
    }
  }
  return { sessionId: row.sessionId, sequence: row.sequence, view: readStepRecord(row.record, row.createdAt), ocr, createdAt: row.createdAt };
}
