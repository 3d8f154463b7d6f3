import { and, count, eq, gt, isNull, ne, sql } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { tokens } from "../db/schema.js";
import type { BindOutcome, TokenRecordStore, TokenRow } from "./token-record-store.js";

/** Tokens in the coordinator's SQLite file. */
export class SqliteTokenRecordStore implements TokenRecordStore {
  constructor(private readonly db: CoordinatorDb) {}

  async insert(row: TokenRow): Promise<boolean> {
    return this.db.insert(tokens).values(row).onConflictDoNothing({ target: tokens.name }).returning({ name: tokens.name }).all().length === 1;
  }

  async all(): Promise<TokenRow[]> {
    return this.db.select().from(tokens).orderBy(tokens.name).all();
  }

  async listAfter(after: string | undefined, limit: number): Promise<TokenRow[]> {
    return this.db
      .select()
      .from(tokens)
      .where(after !== undefined ? gt(tokens.name, after) : undefined)
      .orderBy(tokens.name)
      .limit(limit)
      .all();
  }

  async byName(name: string): Promise<TokenRow | undefined> {
    return this.db.select().from(tokens).where(eq(tokens.name, name)).get();
  }

  async byHash(hash: string): Promise<TokenRow | undefined> {
    return this.db.select().from(tokens).where(eq(tokens.hash, hash)).get();
  }

  async revoke(name: string, at: number): Promise<TokenRow | undefined> {
    // One statement: a token revoked twice keeps its first time.
    return this.db
      .update(tokens)
      .set({ revokedAt: sql`coalesce(${tokens.revokedAt}, ${at})` })
      .where(eq(tokens.name, name))
      .returning()
      .get();
  }

  async bindAgent(tokenName: string, agentId: string): Promise<BindOutcome> {
    // better-sqlite3 runs the transaction synchronously: nothing interleaves.
    return this.db.transaction((tx): BindOutcome => {
      const row = tx.select().from(tokens).where(eq(tokens.name, tokenName)).get();
      if (!row || row.kind !== "agent") return "not-agent";
      if (row.agentId !== null && row.agentId !== agentId) return "token-bound-elsewhere";
      const other = tx
        .select({ name: tokens.name })
        .from(tokens)
        .where(and(eq(tokens.agentId, agentId), ne(tokens.name, tokenName), isNull(tokens.revokedAt)))
        .get();
      if (other) return "agent-taken";
      if (row.agentId === null) tx.update(tokens).set({ agentId }).where(eq(tokens.name, tokenName)).run();
      return "bound";
    });
  }

  async liveTokenOf(agentId: string): Promise<string | undefined> {
    return this.db.select({ name: tokens.name }).from(tokens).where(and(eq(tokens.agentId, agentId), isNull(tokens.revokedAt))).get()?.name;
  }

  async count(): Promise<number> {
    return this.db.select({ n: count() }).from(tokens).get()?.n ?? 0;
  }
}
