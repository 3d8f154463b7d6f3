import { and, count, desc, eq, lt, or, sql, type SQL } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { videoSessions } from "../db/pg-schema.js";
import { videoSessionChanges } from "./video-session-changes.js";
import type { VideoSessionFilter, VideoSessionRow, VideoSessionStore } from "./video-session-store.js";

// Bytewise, as SQLite compares: the order of sessions sharing a millisecond
// must not depend on the database's locale.
const idBytes = sql`${videoSessions.sessionId} collate "C"`;

/** The video session index in PostgreSQL. */
export class PgVideoSessionStore implements VideoSessionStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  async get(sessionId: string): Promise<VideoSessionRow | undefined> {
    const [row] = await this.db.select().from(videoSessions).where(eq(videoSessions.sessionId, sessionId));
    return row;
  }

  async upsert(sessionId: string, merge: (existing: VideoSessionRow | undefined) => VideoSessionRow): Promise<VideoSessionRow> {
    return this.db.transaction(async (tx) => {
      for (;;) {
        // The row lock keeps any other write of the session (another replica's too) out until commit.
        const [existing] = await tx.select().from(videoSessions).where(eq(videoSessions.sessionId, sessionId)).for("update");
        const row = merge(existing);
        if (existing) {
          await tx.update(videoSessions).set(videoSessionChanges(row)).where(eq(videoSessions.sessionId, sessionId));
          return row;
        }
        const inserted = await tx.insert(videoSessions).values(row).onConflictDoNothing().returning({ sessionId: videoSessions.sessionId });
        if (inserted.length > 0) return row;
        // Another writer inserted it since the read (and has committed): merge into theirs.
      }
    });
  }

  async countByStatus(): Promise<{ status: string; n: number }[]> {
    return this.db.select({ status: videoSessions.status, n: count() }).from(videoSessions).groupBy(videoSessions.status);
  }

  async listAfter(filter: VideoSessionFilter, after: readonly [number, string] | undefined, limit: number): Promise<VideoSessionRow[]> {
    const where: SQL[] = [];
    if (filter.serial) where.push(eq(videoSessions.serial, filter.serial));
    if (filter.status) where.push(eq(videoSessions.status, filter.status));
    if (after) where.push(or(lt(videoSessions.createdAt, after[0]), and(eq(videoSessions.createdAt, after[0]), sql`${idBytes} < ${after[1]}`)) as SQL);
    return this.db
      .select()
      .from(videoSessions)
      .where(where.length > 0 ? and(...where) : undefined)
      .orderBy(desc(videoSessions.createdAt), sql`${idBytes} desc`)
      .limit(limit);
  }
}
