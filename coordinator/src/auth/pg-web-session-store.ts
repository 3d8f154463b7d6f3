import { and, asc, count, eq, gt, inArray, lte, sql } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { webSessions } from "../db/pg-schema.js";
import type { WebSessionLimits, WebSessionRow, WebSessionStore } from "./web-session-store.js";

// Sign-ins take turns on this (transaction-scoped) lock, so replicas signing
// the same user in at once hold the caps exactly. Sign-ins are rare.
const SIGN_IN_LOCK = 0x6661726d0001; // "farm" + 1

/** Dashboard sign-ins in the replicas' PostgreSQL database. */
export class PgWebSessionStore implements WebSessionStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  add(row: WebSessionRow, limits: WebSessionLimits): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await tx.execute(sql`select pg_advisory_xact_lock(${SIGN_IN_LOCK}::bigint)`);
      await tx.delete(webSessions).where(lte(webSessions.expiresAt, limits.now));
      const own = await tx
        .select({ idHash: webSessions.idHash })
        .from(webSessions)
        .where(eq(webSessions.tokenName, row.tokenName))
        .orderBy(asc(webSessions.createdAt), asc(webSessions.idHash));
      const evict = own.slice(0, Math.max(0, own.length - limits.perUser + 1)).map((r) => r.idHash);
      if (evict.length > 0) await tx.delete(webSessions).where(inArray(webSessions.idHash, evict));
      const [live] = await tx.select({ n: count() }).from(webSessions);
      if ((live?.n ?? 0) >= limits.total) return false;
      await tx.insert(webSessions).values(row);
      return true;
    });
  }

  async get(idHash: string): Promise<WebSessionRow | undefined> {
    const [row] = await this.db.select().from(webSessions).where(eq(webSessions.idHash, idHash));
    return row;
  }

  async delete(idHash: string): Promise<void> {
    await this.db.delete(webSessions).where(eq(webSessions.idHash, idHash));
  }

  async deleteOf(tokenName: string): Promise<number> {
    const deleted = await this.db.delete(webSessions).where(eq(webSessions.tokenName, tokenName)).returning({ idHash: webSessions.idHash });
    return deleted.length;
  }

  async countOf(tokenName: string, now: number): Promise<number> {
    const [row] = await this.db
      .select({ n: count() })
      .from(webSessions)
      .where(and(eq(webSessions.tokenName, tokenName), gt(webSessions.expiresAt, now)));
    return row?.n ?? 0;
  }
}
