import { and, count, desc, eq, type SQL } from "drizzle-orm";
import { Errors } from "@farm/shared/errors";
import type { EvidenceStore } from "./evidence-store.js";
import type { CoordinatorDb } from "./db/open-database.js";
import { videoSessions } from "./db/schema.js";

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

  list(filter: { serial?: string; status?: string }): VideoSessionRow[] {
    const where: SQL[] = [];
    if (filter.serial) where.push(eq(videoSessions.serial, filter.serial));
    if (filter.status) where.push(eq(videoSessions.status, filter.status));
    return this.db
      .select()
      .from(videoSessions)
      .where(where.length ? and(...where) : undefined)
      .orderBy(desc(videoSessions.createdAt))
      .all();
  }
}
