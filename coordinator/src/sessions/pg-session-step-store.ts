import { and, asc, desc, eq, gt, like, sql } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { sessionImages, sessions, sessionSteps } from "../db/pg-schema.js";
import type { SessionRow } from "./session-store.js";
import type { SessionImageRow, SessionStepStore, StepRow } from "./session-step-store.js";

/** Timelines in the replicas' PostgreSQL database. */
export class PgSessionStepStore implements SessionStepStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  append(row: StepRow, failed: boolean): Promise<SessionRow | undefined> {
    // The step and its count commit together: a duplicate sequence (23505) rolls the count back.
    return this.db.transaction(async (tx) => {
      const [counted] = await tx
        .update(sessions)
        .set({ stepCount: sql`${sessions.stepCount} + 1`, failedStepCount: sql`${sessions.failedStepCount} + ${failed ? 1 : 0}` })
        .where(eq(sessions.sessionId, row.sessionId))
        .returning();
      if (!counted) return undefined;
      await tx.insert(sessionSteps).values(row);
      return counted;
    });
  }

  async get(sessionId: string, sequence: number): Promise<StepRow | undefined> {
    const rows = await this.db.select().from(sessionSteps).where(and(eq(sessionSteps.sessionId, sessionId), eq(sessionSteps.sequence, sequence))).limit(1);
    return rows[0];
  }

  async setOcr(sessionId: string, sequence: number, ocr: string): Promise<StepRow | undefined> {
    const rows = await this.db.update(sessionSteps).set({ ocr }).where(and(eq(sessionSteps.sessionId, sessionId), eq(sessionSteps.sequence, sequence))).returning();
    return rows[0];
  }

  listAfter(sessionId: string, afterSequence: number, limit: number): Promise<StepRow[]> {
    return this.db
      .select()
      .from(sessionSteps)
      .where(and(eq(sessionSteps.sessionId, sessionId), gt(sessionSteps.sequence, afterSequence)))
      .orderBy(asc(sessionSteps.sequence))
      .limit(limit);
  }

  async maxSequence(sessionId: string): Promise<number> {
    // max() of an integer column is an integer: node-postgres reads it as a number.
    const [r] = await this.db.select({ max: sql<number | null>`max(${sessionSteps.sequence})` }).from(sessionSteps).where(eq(sessionSteps.sessionId, sessionId));
    return r?.max ?? 0;
  }

  pendingOcr(limit: number): Promise<StepRow[]> {
    return this.db.select().from(sessionSteps).where(like(sessionSteps.ocr, "{\"status\":\"pending\"%")).limit(limit);
  }

  async addImage(row: SessionImageRow): Promise<void> {
    await this.db.insert(sessionImages).values(row).onConflictDoNothing();
  }

  async image(sessionId: string, sha256: string): Promise<SessionImageRow | undefined> {
    const rows = await this.db.select().from(sessionImages).where(and(eq(sessionImages.sessionId, sessionId), eq(sessionImages.sha256, sha256))).limit(1);
    return rows[0];
  }

  async recentImages(sessionId: string, limit: number): Promise<string[]> {
    // The table has no insertion order column; rows are only ever inserted
    // (never updated or deleted), so their physical position (ctid) is the
    // order they were added in. It is a hint (screens the agent need not
    // upload again), so an occasional misordering costs an upload, no more.
    const rows = await this.db
      .select({ sha256: sessionImages.sha256 })
      .from(sessionImages)
      .where(eq(sessionImages.sessionId, sessionId))
      .orderBy(desc(sql`ctid`))
      .limit(limit);
    return rows.map((r) => r.sha256);
  }
}
