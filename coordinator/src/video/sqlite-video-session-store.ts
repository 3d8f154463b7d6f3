import { and, count, desc, eq, lt, or, type SQL } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { videoSessions } from "../db/schema.js";
import { videoSessionChanges } from "./video-session-changes.js";
import type { VideoSessionFilter, VideoSessionRow, VideoSessionStore } from "./video-session-store.js";

/** The video session index in the coordinator's SQLite database. */
export class SqliteVideoSessionStore implements VideoSessionStore {
  constructor(private readonly db: CoordinatorDb) {}

  async get(sessionId: string): Promise<VideoSessionRow | undefined> {
    return this.db.select().from(videoSessions).where(eq(videoSessions.sessionId, sessionId)).get();
  }

  async upsert(sessionId: string, merge: (existing: VideoSessionRow | undefined) => VideoSessionRow): Promise<VideoSessionRow> {
    return this.db.transaction((tx) => {
      const row = merge(tx.select().from(videoSessions).where(eq(videoSessions.sessionId, sessionId)).get());
      tx.insert(videoSessions).values(row).onConflictDoUpdate({ target: videoSessions.sessionId, set: videoSessionChanges(row) }).run();
      return row;
    });
  }

  async countByStatus(): Promise<{ status: string; n: number }[]> {
    return this.db.select({ status: videoSessions.status, n: count() }).from(videoSessions).groupBy(videoSessions.status).all();
  }

  async listAfter(filter: VideoSessionFilter, after: readonly [number, string] | undefined, limit: number): Promise<VideoSessionRow[]> {
    const where: SQL[] = [];
    if (filter.serial) where.push(eq(videoSessions.serial, filter.serial));
    if (filter.status) where.push(eq(videoSessions.status, filter.status));
    if (after) where.push(or(lt(videoSessions.createdAt, after[0]), and(eq(videoSessions.createdAt, after[0]), lt(videoSessions.sessionId, after[1]))) as SQL);
    return this.db
      .select()
      .from(videoSessions)
      .where(where.length > 0 ? and(...where) : undefined)
      .orderBy(desc(videoSessions.createdAt), desc(videoSessions.sessionId))
      .limit(limit)
      .all();
  }
}
