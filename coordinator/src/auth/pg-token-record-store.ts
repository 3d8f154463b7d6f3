import { and, count, eq, gt, isNull, ne, sql } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { tokens } from "../db/pg-schema.js";
import type { BindOutcome, TokenRecordStore, TokenRow } from "./token-record-store.js";

/** Tokens in the replicas' PostgreSQL database. */
export class PgTokenRecordStore implements TokenRecordStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  async insert(row: TokenRow): Promise<boolean> {
    // ON CONFLICT instead of a read first: two replicas creating one name cannot both succeed.
    const rows = await this.db.insert(tokens).values(row).onConflictDoNothing({ target: tokens.name }).returning({ name: tokens.name });
    return rows.length === 1;
  }

  all(): Promise<TokenRow[]> {
    return this.db.select().from(tokens).orderBy(tokens.name);
  }

  listAfter(after: string | undefined, limit: number): Promise<TokenRow[]> {
    return this.db
      .select()
      .from(tokens)
      .where(after !== undefined ? gt(tokens.name, after) : undefined)
      .orderBy(tokens.name)
      .limit(limit);
  }

  async byName(name: string): Promise<TokenRow | undefined> {
    const [row] = await this.db.select().from(tokens).where(eq(tokens.name, name));
    return row;
  }

  async byHash(hash: string): Promise<TokenRow | undefined> {
    const [row] = await this.db.select().from(tokens).where(eq(tokens.hash, hash));
    return row;
  }

  async revoke(name: string, at: number): Promise<TokenRow | undefined> {
    // One statement: a token revoked twice keeps its first time.
    const [row] = await this.db
      .update(tokens)
      .set({ revokedAt: sql`coalesce(${tokens.revokedAt}, ${at}::bigint)` })
      .where(eq(tokens.name, name))
      .returning();
    return row;
  }

  bindAgent(tokenName: string, agentId: string): Promise<BindOutcome> {
    return this.db.transaction(async (tx): Promise<BindOutcome> => {
      // Two tokens attaching as one agent id at once (on two replicas) take
      // turns on this lock, so the second sees the first's binding; the row
      // lock does the same for one token attaching as two ids.
      await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${"farm-agent-bind:" + agentId}))`);
      const [row] = await tx.select().from(tokens).where(eq(tokens.name, tokenName)).for("update");
      if (!row || row.kind !== "agent") return "not-agent";
      if (row.agentId !== null && row.agentId !== agentId) return "token-bound-elsewhere";
      const [other] = await tx
        .select({ name: tokens.name })
        .from(tokens)
        .where(and(eq(tokens.agentId, agentId), ne(tokens.name, tokenName), isNull(tokens.revokedAt)))
        .limit(1);
      if (other) return "agent-taken";
      if (row.agentId === null) await tx.update(tokens).set({ agentId }).where(eq(tokens.name, tokenName));
      return "bound";
    });
  }

  async liveTokenOf(agentId: string): Promise<string | undefined> {
    const [row] = await this.db
      .select({ name: tokens.name })
      .from(tokens)
      .where(and(eq(tokens.agentId, agentId), isNull(tokens.revokedAt)))
      .limit(1);
    return row?.name;
  }

  async count(): Promise<number> {
    const [row] = await this.db.select({ n: count() }).from(tokens);
    return row?.n ?? 0;
  }
}
