import { and, asc, desc, eq, gt, like, sql } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { sessionImages, sessions, sessionSteps } from "../db/schema.js";
import type { SessionRow } from "./session-store.js";
import type { SessionImageRow, SessionStepStore, StepRow } from "./session-step-store.js";

/** Timelines in the coordinator's SQLite database. */
export class SqliteSessionStepStore implements SessionStepStore {
  constructor(private readonly db: CoordinatorDb) {}

  async append(row: StepRow, failed: boolean): Promise<SessionRow | undefined> {
    return this.db.transaction((tx) => {
      const counted = tx
        .update(sessions)
        .set({ stepCount: sql`${sessions.stepCount} + 1`, failedStepCount: sql`${sessions.failedStepCount} + ${failed ? 1 : 0}` })
        .where(eq(sessions.sessionId, row.sessionId))
        .returning()
        .get();
      if (!counted) return undefined;
      tx.insert(sessionSteps).values(row).run();
      return counted;
    });
  }

  async get(sessionId: string, sequence: number): Promise<StepRow | undefined> {
    return this.db.select().from(sessionSteps).where(and(eq(sessionSteps.sessionId, sessionId), eq(sessionSteps.sequence, sequence))).get();
  }

  async setOcr(sessionId: string, sequence: number, ocr: string): Promise<StepRow | undefined> {
    return this.db.update(sessionSteps).set({ ocr }).where(and(eq(sessionSteps.sessionId, sessionId), eq(sessionSteps.sequence, sequence))).returning().get();
  }

  async listAfter(sessionId: string, afterSequence: number, limit: number): Promise<StepRow[]> {
    return this.db
      .select()
      .from(sessionSteps)
      .where(and(eq(sessionSteps.sessionId, sessionId), gt(sessionSteps.sequence, afterSequence)))
      .orderBy(asc(sessionSteps.sequence))
      .limit(limit)
      .all();
  }

  async maxSequence(sessionId: string): Promise<number> {
    const r = this.db.select({ max: sql<number | null>`max(${sessionSteps.sequence})` }).from(sessionSteps).where(eq(sessionSteps.sessionId, sessionId)).get();
    return r?.max ?? 0;
  }

  async pendingOcr(limit: number): Promise<StepRow[]> {
    return this.db.select().from(sessionSteps).where(like(sessionSteps.ocr, "{\"status\":\"pending\"%")).limit(limit).all();
  }

  async addImage(row: SessionImageRow): Promise<void> {
    this.db.insert(sessionImages).values(row).onConflictDoNothing().run();
  }

  async image(sessionId: string, sha256: string): Promise<SessionImageRow | undefined> {
    return this.db.select().from(sessionImages).where(and(eq(sessionImages.sessionId, sessionId), eq(sessionImages.sha256, sha256))).get();
  }

  async recentImages(sessionId: string, limit: number): Promise<string[]> {
    return this.db
      .select({ sha256: sessionImages.sha256 })
      .from(sessionImages)
      .where(eq(sessionImages.sessionId, sessionId))
      .orderBy(desc(sql`rowid`))
      .limit(limit)
      .all()
      .map((r) => r.sha256);
  }
}
