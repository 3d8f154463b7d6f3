import { and, asc, count, eq, gt, inArray, lte } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { webSessions } from "../db/schema.js";
import type { WebSessionLimits, WebSessionRow, WebSessionStore } from "./web-session-store.js";

/** Dashboard sign-ins in the coordinator's SQLite file. */
export class SqliteWebSessionStore implements WebSessionStore {
  constructor(private readonly db: CoordinatorDb) {}

  async add(row: WebSessionRow, limits: WebSessionLimits): Promise<boolean> {
    return this.db.transaction((tx) => {
      tx.delete(webSessions).where(lte(webSessions.expiresAt, limits.now)).run();
      const own = tx
        .select({ idHash: webSessions.idHash })
        .from(webSessions)
        .where(eq(webSessions.tokenName, row.tokenName))
        .orderBy(asc(webSessions.createdAt), asc(webSessions.idHash))
        .all();
      const evict = own.slice(0, Math.max(0, own.length - limits.perUser + 1)).map((r) => r.idHash);
      if (evict.length > 0) tx.delete(webSessions).where(inArray(webSessions.idHash, evict)).run();
      const live = tx.select({ n: count() }).from(webSessions).get()?.n ?? 0;
      if (live >= limits.total) return false;
      tx.insert(webSessions).values(row).run();
      return true;
    });
  }

  async get(idHash: string): Promise<WebSessionRow | undefined> {
    return this.db.select().from(webSessions).where(eq(webSessions.idHash, idHash)).get();
  }

  async delete(idHash: string): Promise<void> {
    this.db.delete(webSessions).where(eq(webSessions.idHash, idHash)).run();
  }

  async deleteOf(tokenName: string): Promise<number> {
    return this.db.delete(webSessions).where(eq(webSessions.tokenName, tokenName)).run().changes;
  }

  async countOf(tokenName: string, now: number): Promise<number> {
    return this.db.select({ n: count() }).from(webSessions).where(and(eq(webSessions.tokenName, tokenName), gt(webSessions.expiresAt, now))).get()?.n ?? 0;
  }
}
