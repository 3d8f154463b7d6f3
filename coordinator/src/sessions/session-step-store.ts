import type { SessionRow } from "./session-store.js";

/** One stored step: its versioned record (step-record.ts) and its OCR, kept apart. */
export interface StepRow {
  sessionId: string;
  sequence: number;
  /** The record as JSON text, read by readStepRecord. */
  record: string;
  /** The OCR of its before screenshot as JSON (StepOcrRecord), or null when OCR is off. */
  ocr: string | null;
  createdAt: number;
}

/** A stored file (a screenshot, a log, a diagnosis) as a session references it. */
export interface SessionImageRow {
  sessionId: string;
  sha256: string;
  size: number;
  /** Pixels, for images; 0 otherwise. */
  width: number;
  height: number;
  mimeType: string;
}

/** Where timelines are kept. Each method is one atomic write or read. */
export interface SessionStepStore {
  /**
   * Stores a step and counts it on its session (and as failed when it
   * failed), in one transaction. Returns the session as it is after, or
   * undefined when there is no such session (nothing is written).
   */
  append(row: StepRow, failed: boolean): Promise<SessionRow | undefined>;
  get(sessionId: string, sequence: number): Promise<StepRow | undefined>;
  /** Replaces a step's OCR; returns the step after, or undefined when there is no such step. */
  setOcr(sessionId: string, sequence: number, ocr: string): Promise<StepRow | undefined>;
  /** Up to `limit` steps of a session, oldest first, with sequence > afterSequence. */
  listAfter(sessionId: string, afterSequence: number, limit: number): Promise<StepRow[]>;
  /** The highest sequence stored for a session, 0 when none. */
  maxSequence(sessionId: string): Promise<number>;
  /** Steps whose OCR was still pending (a restart cut it short). */
  pendingOcr(limit: number): Promise<StepRow[]>;
  /** Records that a session shows an image (idempotent). */
  addImage(row: SessionImageRow): Promise<void>;
  image(sessionId: string, sha256: string): Promise<SessionImageRow | undefined>;
  /** Up to `limit` of the images a session shows, most recently added first. */
  recentImages(sessionId: string, limit: number): Promise<string[]>;
}
