import { sql, type SQL } from "drizzle-orm";
import type { FarmDatabase } from "../db/database.js";

/** A `--request-id` key as stored: who asked what, and how it ended (once it has). */
export interface IdempotencyRow {
  fingerprint: string;
  state: "pending" | "done";
  /** The coordinator process that claimed the key and runs (or ran) the first call. */
  owner: string;
  /** Done with an answer: the encoded answer. */
  answer: string | null;
  /** Done with an error: the encoded error envelope. */
  error: string | null;
}

export interface IdempotencyClaim {
  caller: string;
  requestId: string;
  fingerprint: string;
  owner: string;
}

/**
 * Request-id keys in the coordinator's database, one store for SQLite and
 * PostgreSQL: every statement here is the same text on both (the casts type
 * PostgreSQL's parameters and are no-ops to SQLite). The claim is one
 * upsert, so two replicas claiming one key at once get one winner from the
 * database itself (the primary key), with no lock of our own.
 */
export class IdempotencyStore {
  constructor(private readonly database: FarmDatabase) {}

  /**
   * Claims the key for a first call: true when this caller runs it. A key
   * whose row has expired is claimed again in the same statement (the old
   * row is overwritten), so a sweep that has not run yet changes nothing.
   */
  async claim(c: IdempotencyClaim, now: number, expiresAt: number): Promise<boolean> {
    const q = sql`INSERT INTO idempotency_keys (caller, request_id, fingerprint, state, owner, answer, error, created_at, expires_at)
      VALUES (CAST(${c.caller} AS text), CAST(${c.requestId} AS text), CAST(${c.fingerprint} AS text), 'pending', CAST(${c.owner} AS text), NULL, NULL, CAST(${now} AS bigint), CAST(${expiresAt} AS bigint))
      ON CONFLICT (caller, request_id) DO UPDATE SET fingerprint = excluded.fingerprint, state = excluded.state, owner = excluded.owner,
        answer = NULL, error = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at
      WHERE idempotency_keys.expires_at <= CAST(${now} AS bigint)
      RETURNING owner`;
    return (await this.rows(q)).length === 1;
  }

  /** The unexpired row of a key; undefined when there is none. */
  async read(caller: string, requestId: string, now: number): Promise<IdempotencyRow | undefined> {
    const q = sql`SELECT fingerprint, state, owner, answer, error FROM idempotency_keys
      WHERE caller = ${caller} AND request_id = ${requestId} AND expires_at > CAST(${now} AS bigint)`;
    const row = (await this.rows(q))[0] as Record<string, unknown> | undefined;
    if (!row) return undefined;
    return {
      fingerprint: String(row["fingerprint"]),
      state: row["state"] === "done" ? "done" : "pending",
      owner: String(row["owner"]),
      answer: row["answer"] == null ? null : String(row["answer"]),
      error: row["error"] == null ? null : String(row["error"]),
    };
  }

  /**
   * Records the first call's outcome. Only the claim's owner, and only while
   * pending: a row re-claimed after it expired is another call's.
   */
  async finish(c: IdempotencyClaim, outcome: { answer: string } | { error: string }): Promise<boolean> {
    const answer = "answer" in outcome ? outcome.answer : null;
    const error = "error" in outcome ? outcome.error : null;
    const q = sql`UPDATE idempotency_keys SET state = 'done', answer = CAST(${answer} AS text), error = CAST(${error} AS text)
      WHERE caller = ${c.caller} AND request_id = ${c.requestId} AND owner = ${c.owner} AND fingerprint = ${c.fingerprint} AND state = 'pending'
      RETURNING owner`;
    return (await this.rows(q)).length === 1;
  }

  /** Deletes up to `batch` expired keys; returns how many went (fewer than `batch`: none left). */
  async sweep(now: number, batch: number): Promise<number> {
    const q = sql`DELETE FROM idempotency_keys WHERE (caller, request_id) IN (
      SELECT caller, request_id FROM idempotency_keys WHERE expires_at <= CAST(${now} AS bigint) LIMIT CAST(${batch} AS integer)
    ) RETURNING caller`;
    return (await this.rows(q)).length;
  }

  private async rows(q: SQL): Promise<unknown[]> {
    const d = this.database;
    if (d.dialect === "sqlite") return d.db.all(q);
    return (await d.db.execute(q)).rows;
  }
}
