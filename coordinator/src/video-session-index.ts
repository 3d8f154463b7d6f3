import { and, desc, eq, type SQL } from "drizzle-orm";
import type { CoordinatorDb } from "./db/open-database.js";
import { videoSessions } from "./db/schema.js";

export type VideoSessionRow = typeof videoSessions.$inferSelect;

/**
 * Which agent holds each video session, and what it last reported. Status
 * and stop route by this, so they reach the right agent even when the
 * phone is gone; listings (CLI, dashboard) read it without asking agents.
 */
export class VideoSessionIndex {
  constructor(private readonly db: CoordinatorDb) {}

  get(sessionId: string): VideoSessionRow | undefined {
    return this.db.select().from(videoSessions).where(eq(videoSessions.sessionId, sessionId)).get();
  }

  upsert(row: VideoSessionRow): void {
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
