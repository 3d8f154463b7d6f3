import { and, asc, desc, eq, lt, or, type SQL } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { sessions } from "../db/pg-schema.js";
import type { SessionFilter, SessionRow, SessionState, SessionStore } from "./session-store.js";

/** Sessions in the replicas' PostgreSQL database. */
export class PgSessionStore implements SessionStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  async insert(row: SessionRow): Promise<void> {
    await this.db.insert(sessions).values(row);
  }

  async get(sessionId: string): Promise<SessionRow | undefined> {
    const rows = await this.db.select().from(sessions).where(eq(sessions.sessionId, sessionId)).limit(1);
    return rows[0];
  }

  async end(sessionId: string, status: Exclude<SessionState, "running">, endedAt: number): Promise<SessionRow | undefined> {
    // The status check is in the UPDATE: of two replicas ending one session, one wins.
    const rows = await this.db
      .update(sessions)
      .set({ status, endedAt })
      .where(and(eq(sessions.sessionId, sessionId), eq(sessions.status, "running")))
      .returning();
    return rows[0];
  }

  running(leaseId?: string): Promise<SessionRow[]> {
    const where = leaseId === undefined ? eq(sessions.status, "running") : and(eq(sessions.status, "running"), eq(sessions.leaseId, leaseId));
    return this.db.select().from(sessions).where(where).orderBy(asc(sessions.createdAt), asc(sessions.sessionId));
  }

  listAfter(filter: SessionFilter, after: readonly [number, string] | undefined, limit: number): Promise<SessionRow[]> {
    const where: SQL[] = [];
    if (filter.physicalId) where.push(eq(sessions.physicalId, filter.physicalId));
    if (filter.status) where.push(eq(sessions.status, filter.status));
    if (filter.owner) where.push(eq(sessions.owner, filter.owner));
    if (after) where.push(or(lt(sessions.createdAt, after[0]), and(eq(sessions.createdAt, after[0]), lt(sessions.sessionId, after[1]))) as SQL);
    return this.db
      .select()
      .from(sessions)
      .where(where.length > 0 ? and(...where) : undefined)
      .orderBy(desc(sessions.createdAt), desc(sessions.sessionId))
      .limit(limit);
  }
}
