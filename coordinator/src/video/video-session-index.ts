import { Errors } from "@farm/shared/errors";
import type { EvidenceStore } from "../evidence/evidence-store.js";
import { decodePageToken, pageSizeOf, readPage, type Page, type PageRequest } from "../paging.js";
import type { VideoSessionFilter, VideoSessionRow, VideoSessionStore } from "./video-session-store.js";

export type { VideoSessionRow } from "./video-session-store.js";

const TERMINAL = new Set(["complete", "partial", "failed"]);

/**
 * Which agent holds each video session, and what it last reported. Status
 * and stop route by this, so they reach the right agent even when the
 * phone is gone; listings (CLI, dashboard) read it without asking agents.
 */
export class VideoSessionIndex {
  /** Receives every change as stored; set by the coordinator for live watchers. */
  onUpsert: ((row: VideoSessionRow) => void) | undefined;
  /** The last upsert: upserts run one after another, so onUpsert sees them in the order they were stored. */
  private tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly store: VideoSessionStore) {}

  get(sessionId: string): Promise<VideoSessionRow | undefined> {
    return this.store.get(sessionId);
  }

  /** Stores what is known of a session; returns the row as stored (see merged). */
  upsert(input: VideoSessionRow): Promise<VideoSessionRow> {
    const run = this.tail.then(async () => {
      const row = await this.store.upsert(input.sessionId, (existing) => merged(existing, input));
      this.onUpsert?.(row);
      return row;
    });
    // A failed upsert is its caller's to handle; the next one runs regardless.
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Takes a session's terminal state from its stored bundle's manifest. */
  async settleFromBundle(row: VideoSessionRow, store: EvidenceStore): Promise<void> {
    const { text, manifest } = await store.manifest(row.sessionId);
    await this.upsert({
      ...row,
      status: manifest.status,
      code: manifest.status === "complete" ? "" : Errors.EVIDENCE_CAPTURE_FAILED.code,
      message: manifest.status === "complete" ? "" : manifest.errors.map((e) => `${e.stage}: ${e.code}`).join(", "),
      workerAvailable: false,
      manifestJson: text,
      updatedAt: Date.now(),
    });
  }

  countByStatus(): Promise<{ status: string; n: number }[]> {
    return this.store.countByStatus();
  }

  /**
   * One page, newest first; the key is (created_at, session_id): unique, and
   * stable because an update never changes created_at.
   */
  async listPage(filter: VideoSessionFilter, page: PageRequest): Promise<Page<VideoSessionRow>> {
    const scope = { list: "video-sessions", filter: { serial: filter.serial, status: filter.status } };
    const shape = ["number", "string"] as const;
    // A bad size or token is refused before the index is read; readPage then cuts the page from the rows read.
    const size = pageSizeOf(page.pageSize);
    const after = decodePageToken(page.pageToken, scope, shape);
    const rows = await this.store.listAfter(filter, after, size + 1);
    return readPage(page, scope, shape, (row: VideoSessionRow) => [row.createdAt, row.sessionId] as const, () => rows);
  }
}

/** What an upsert stores over `existing`. */
function merged(existing: VideoSessionRow | undefined, input: VideoSessionRow): VideoSessionRow {
  if (!existing) return input;
  // A late answer from before the end must not make a finished session live again.
  const row = TERMINAL.has(existing.status) && !TERMINAL.has(input.status) ? { ...input, status: existing.status, code: existing.code, message: existing.message, manifestJson: existing.manifestJson, workerAvailable: false } : input;
  // Who asked and when stay as first recorded.
  return { ...row, requestedBy: existing.requestedBy, createdAt: existing.createdAt };
}
