import { and, asc, desc, eq, lt, or, type SQL } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { sessions } from "../db/schema.js";
import type { SessionFilter, SessionRow, SessionState, SessionStore } from "./session-store.js";

/** Sessions in the coordinator's SQLite database. */
export class SqliteSessionStore implements SessionStore {
  constructor(private readonly db: CoordinatorDb) {}

  async insert(row: SessionRow): Promise<void> {
    this.db.insert(sessions).values(row).run();
  }

  async get(sessionId: string): Promise<SessionRow | undefined> {
    return this.db.select().from(sessions).where(eq(sessions.sessionId, sessionId)).get();
  }

  async end(sessionId: string, status: Exclude<SessionState, "running">, endedAt: number): Promise<SessionRow | undefined> {
    return this.db
      .update(sessions)
      .set({ status, endedAt })
      .where(and(eq(sessions.sessionId, sessionId), eq(sessions.status, "running")))
      .returning()
      .get();
  }

  async running(leaseId?: string): Promise<SessionRow[]> {
    const where = leaseId === undefined ? eq(sessions.status, "running") : and(eq(sessions.status, "running"), eq(sessions.leaseId, leaseId));
    return this.db.select().from(sessions).where(where).orderBy(asc(sessions.createdAt), asc(sessions.sessionId)).all();
  }

  async listAfter(filter: SessionFilter, after: readonly [number, string] | undefined, limit: number): Promise<SessionRow[]> {
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
      .limit(limit)
      .all();
  }
}
