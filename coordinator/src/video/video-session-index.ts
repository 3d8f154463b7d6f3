import { and, count, desc, eq, lt, or, type SQL } from "drizzle-orm";
import { Errors } from "@farm/shared/errors";
import type { EvidenceStore } from "../evidence/evidence-store.js";
import type { CoordinatorDb } from "../db/open-database.js";
import { videoSessions } from "../db/schema.js";
import { readPage, type Page, type PageRequest } from "../paging.js";

const TERMINAL = new Set(["complete", "partial", "failed"]);

export type VideoSessionRow = typeof videoSessions.$inferSelect;

/**
 * Which agent holds each video session, and what it last reported. Status
 * and stop route by this, so they reach the right agent even when the
 * phone is gone; listings (CLI, dashboard) read it without asking agents.
 */
export class VideoSessionIndex {
  /** Receives every change; set by the coordinator for live watchers. */
  onUpsert: ((row: VideoSessionRow) => void) | undefined;

  constructor(private readonly db: CoordinatorDb) {}

  get(sessionId: string): VideoSessionRow | undefined {
    return this.db.select().from(videoSessions).where(eq(videoSessions.sessionId, sessionId)).get();
  }

  upsert(input: VideoSessionRow): void {
    // A late answer from before the end must not make a finished session live again.
    const existing = this.get(input.sessionId);
    const row = existing && TERMINAL.has(existing.status) && !TERMINAL.has(input.status) ? { ...input, status: existing.status, code: existing.code, message: existing.message, manifestJson: existing.manifestJson, workerAvailable: false } : input;
    // Who asked and when stay as first recorded.
    const set = {
      agentId: row.agentId,
      serial: row.serial,
      physicalId: row.physicalId,
      updatedAt: row.updatedAt,
      status: row.status,
      code: row.code,
      message: row.message,
      workerAvailable: row.workerAvailable,
      recoveryState: row.recoveryState,
      manifestJson: row.manifestJson,
    };
    this.db.insert(videoSessions).values(row).onConflictDoUpdate({ target: videoSessions.sessionId, set }).run();
    this.onUpsert?.(row);
  }

  /** Takes a session's terminal state from its stored bundle's manifest. */
  async settleFromBundle(row: VideoSessionRow, store: EvidenceStore): Promise<void> {
    const { text, manifest } = await store.manifest(row.sessionId);
    this.upsert({
      ...row,
      status: manifest.status,
      code: manifest.status === "complete" ? "" : Errors.EVIDENCE_CAPTURE_FAILED.code,
      message: manifest.status === "complete" ? "" : manifest.errors.map((e) => `${e.stage}: ${e.code}`).join(", "),
      workerAvailable: false,
      manifestJson: text,
      updatedAt: Date.now(),
    });
  }

  countByStatus(): { status: string; n: number }[] {
    return this.db.select({ status: videoSessions.status, n: count() }).from(videoSessions).groupBy(videoSessions.status).all();
  }

  /**
   * One page, newest first; the key is (created_at, session_id): unique, and
   * stable because an update never changes created_at.
   */
  listPage(filter: { serial?: string; status?: string }, page: PageRequest): Page<VideoSessionRow> {
    const scope = { list: "video-sessions", filter: { serial: filter.serial, status: filter.status } };
    return readPage(page, scope, ["number", "string"] as const, (row: VideoSessionRow) => [row.createdAt, row.sessionId] as const, (after, limit) => {
      const where: SQL[] = [];
      if (filter.serial) where.push(eq(videoSessions.serial, filter.serial));
      if (filter.status) where.push(eq(videoSessions.status, filter.status));
      if (after) where.push(or(lt(videoSessions.createdAt, after[0]), and(eq(videoSessions.createdAt, after[0]), lt(videoSessions.sessionId, after[1]))) as SQL);
      return this.db
        .select()
        .from(videoSessions)
        .where(where.length ? and(...where) : undefined)
        .orderBy(desc(videoSessions.createdAt), desc(videoSessions.sessionId))
        .limit(limit)
        .all();
    });
  }
}
