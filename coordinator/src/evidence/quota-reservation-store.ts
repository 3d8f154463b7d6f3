import { sql, type SQL } from "drizzle-orm";
import type { FarmDatabase } from "../db/database.js";

/** What a reservation holds bytes for. */
export type ReservationKind = "still" | "video" | "session-file";

/** Bytes held against a user's quota until what they are for settles (or `expiresAt`). */
export interface QuotaReservation {
  id: string;
  user: string;
  kind: ReservationKind;
  /** A capture or recording in flight: counted against the captures-per-user limit. */
  capture: boolean;
  /** Held bytes; for a capture, the most it may hold (its bundle's largest size). */
  bytes: number;
  expiresAt: number;
}

export interface QuotaLimits {
  quotaBytes: number;
  /** Captures in flight a user may have; checked only for a reservation that is a capture. */
  capturesPerUser: number;
}

/** What counts against a user's quota at one moment. */
export interface QuotaUsage {
  /** Stored evidence bundles (stills and recordings) the user requested. */
  evidenceBytes: number;
  /** Session files (step screenshots, device logs, videos, visual diffs) of the user's sessions. */
  sessionFileBytes: number;
  /** Unexpired reservations. */
  reservedBytes: number;
  /** Unexpired capture reservations. */
  captures: number;
}

// One SQL text for both dialects: the casts type PostgreSQL's parameters
// (and are no-ops to SQLite), and sums are read as numbers (PostgreSQL's
// sum of bigint arrives as text).
const evidenceBytes = (user: string): SQL => sql`(SELECT coalesce(sum(e.total_bytes), 0) FROM evidence e JOIN evidence_grants g ON g.evidence_id = e.evidence_id WHERE g.requested_by = ${user})`;
// Kept as a running total: a sum over every file of the user's sessions grew with their history (15 ms at 100,000 files on SQLite).
const sessionFileBytes = (user: string): SQL => sql`(SELECT coalesce(sum(u.file_bytes), 0) FROM quota_users u WHERE u.user_name = ${user})`;
const reservedBytes = (user: string, now: number): SQL => sql`(SELECT coalesce(sum(r.bytes), 0) FROM quota_reservations r WHERE r.user_name = ${user} AND r.expires_at > CAST(${now} AS bigint))`;
const captures = (user: string, now: number): SQL => sql`(SELECT count(*) FROM quota_reservations r WHERE r.user_name = ${user} AND r.capture = 1 AND r.expires_at > CAST(${now} AS bigint))`;

/**
 * Reservations against users' evidence quotas, one store for SQLite and
 * PostgreSQL (the SQL is the same). A reservation is taken by one
 * conditional INSERT that counts what is stored and reserved (and, for a
 * capture, holds no more than is left); on
 * PostgreSQL it runs after locking the user's row in quota_users, in the
 * same transaction, so two replicas reserving for one user decide one after
 * the other, each seeing the other's row (READ COMMITTED takes a snapshot
 * per statement). SQLite has one writer, so the statement alone is atomic.
 */
export class QuotaReservationStore {
  constructor(private readonly database: FarmDatabase) {}

  /**
   * Inserts the reservation if it fits both limits and returns the bytes it
   * holds; undefined (nothing written) when it does not fit. A capture
   * (`r.capture`) holds `r.bytes` or what is left of the quota, whichever is
   * less, and is refused only when nothing is left: a quota smaller than a
   * bundle's largest size still lets captures that fit run (their upload must
   * fit what they hold). Session files hold exactly `r.bytes`, or nothing.
   */
  async reserve(r: QuotaReservation, limits: QuotaLimits, now: number): Promise<number | undefined> {
    const lock = sql`INSERT INTO quota_users (user_name) VALUES (${r.user}) ON CONFLICT (user_name) DO UPDATE SET user_name = excluded.user_name`;
    // What a crash left behind stops counting at its expiry; the user's rows are dropped here, under the lock.
    const prune = sql`DELETE FROM quota_reservations WHERE user_name = ${r.user} AND expires_at <= CAST(${now} AS bigint)`;
    const capture = r.capture ? 1 : 0;
    // The least that must be left: one byte for a capture, all of them for session files.
    const need = r.capture ? 1 : r.bytes;
    // CASE, not min()/LEAST(): the same text on both dialects (SQLite's two-argument min is PostgreSQL's LEAST).
    const insert = sql`INSERT INTO quota_reservations (id, user_name, kind, capture, bytes, expires_at)
      SELECT CAST(${r.id} AS text), CAST(${r.user} AS text), CAST(${r.kind} AS text), CAST(${capture} AS integer),
        CAST(CASE WHEN q.left_bytes < CAST(${r.bytes} AS bigint) THEN q.left_bytes ELSE CAST(${r.bytes} AS bigint) END AS bigint), CAST(${r.expiresAt} AS bigint)
      FROM (SELECT CAST(${limits.quotaBytes} AS bigint) - (${evidenceBytes(r.user)} + ${sessionFileBytes(r.user)} + ${reservedBytes(r.user, now)}) AS left_bytes) q
      WHERE q.left_bytes >= CAST(${need} AS bigint)
        AND (CAST(${capture} AS integer) = 0 OR ${captures(r.user, now)} < CAST(${limits.capturesPerUser} AS bigint))`;
    // Read back in the same transaction: what the INSERT decided to hold.
    const held = sql`SELECT bytes FROM quota_reservations WHERE id = ${r.id}`;
    type Row = { bytes: unknown };
    const d = this.database;
    if (d.dialect === "sqlite") {
      return d.db.transaction((tx) => {
        tx.run(lock);
        tx.run(prune);
        if (tx.run(insert).changes !== 1) return undefined;
        return Number(tx.all<Row>(held)[0]?.bytes);
      });
    }
    return d.db.transaction(async (tx) => {
      await tx.execute(lock);
      await tx.execute(prune);
      if ((await tx.execute(insert)).rowCount !== 1) return undefined;
      return Number(((await tx.execute(held)).rows[0] as Row | undefined)?.bytes);
    });
  }

  /** The bytes an unexpired reservation holds; undefined when it is gone (settled or expired). */
  async held(id: string, now: number): Promise<number | undefined> {
    const q = sql`SELECT bytes FROM quota_reservations WHERE id = ${id} AND expires_at > CAST(${now} AS bigint)`;
    type Row = { bytes: unknown };
    const d = this.database;
    const row = d.dialect === "sqlite" ? d.db.all<Row>(q)[0] : ((await d.db.execute(q)).rows[0] as Row | undefined);
    return row === undefined ? undefined : Number(row.bytes);
  }

  /**
   * Session files were kept: their bytes join the user's total and the
   * reservation that held them goes, in one transaction (never counted
   * twice, never not at all). A reservation gone already (expired) changes
   * nothing but the total.
   */
  async keep(id: string, user: string, bytes: number): Promise<void> {
    const add = sql`UPDATE quota_users SET file_bytes = file_bytes + CAST(${bytes} AS bigint) WHERE user_name = ${user}`;
    const drop = sql`DELETE FROM quota_reservations WHERE id = ${id}`;
    const d = this.database;
    if (d.dialect === "sqlite") {
      d.db.transaction((tx) => {
        tx.run(add);
        tx.run(drop);
      });
      return;
    }
    await d.db.transaction(async (tx) => {
      await tx.execute(add);
      await tx.execute(drop);
    });
  }

  /** Drops a reservation (settled); nothing when it is gone already. */
  async release(id: string): Promise<void> {
    const q = sql`DELETE FROM quota_reservations WHERE id = ${id}`;
    const d = this.database;
    if (d.dialect === "sqlite") d.db.run(q);
    else await d.db.execute(q);
  }

  async usage(user: string, now: number): Promise<QuotaUsage> {
    const q = sql`SELECT ${evidenceBytes(user)} AS evidence, ${sessionFileBytes(user)} AS files, ${reservedBytes(user, now)} AS reserved, ${captures(user, now)} AS captures`;
    const d = this.database;
    type Row = { evidence: unknown; files: unknown; reserved: unknown; captures: unknown };
    const row = d.dialect === "sqlite" ? d.db.all<Row>(q)[0] : ((await d.db.execute(q)).rows[0] as Row | undefined);
    return { evidenceBytes: Number(row?.evidence ?? 0), sessionFileBytes: Number(row?.files ?? 0), reservedBytes: Number(row?.reserved ?? 0), captures: Number(row?.captures ?? 0) };
  }
}
