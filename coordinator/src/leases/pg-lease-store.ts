import { and, asc, eq, lte, sql, type SQL } from "drizzle-orm";
import type pg from "pg";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { leases, leaseWaiters } from "../db/pg-schema.js";
import type { EndedLease, LeasePhone, LeaseRow, LeaseState, LeaseStore, Waiter } from "./lease-store.js";

// The farm-wide lease lock's key ("leas"), distinct from the migration lock's.
const LEASE_LOCK = 0x6c656173;

const COLUMNS = "lease_id, token_hash, holder, physical_id, agent_id, serial, acquired_at, expires_at, ttl_ms, state, ended_at";

/*
 * The statements every lease cycle runs (grant at once, release, renew), as
 * SQL text with named prepared statements on the pool: PostgreSQL parses and
 * plans each once per connection, and no query builder runs per call (drizzle
 * and Kysely were a sixth of a replica's CPU per cycle). PostgreSQL only:
 * SQLite decides in one process (sqlite-lease-store.ts).
 */
const GRANT_AT_ONCE = {
  name: "farm_lease_grant_at_once",
  // One statement, no lock: replicas grant concurrently. The caller passes the candidates from a random
  // start, so replicas granting at the same moment mostly try different phones; two that try the same
  // one meet at the unique index: one inserts, the other inserts nothing (DO NOTHING) and may try again.
  text: `
    INSERT INTO leases (${COLUMNS})
    SELECT $1, $2, $3, c.physical_id, c.agent_id, c.serial, $4, $5, $6, 'active', NULL
    FROM (SELECT e->>'p' AS physical_id, e->>'a' AS agent_id, e->>'s' AS serial, n
          FROM jsonb_array_elements($7::jsonb) WITH ORDINALITY AS t(e, n)) c
    WHERE NOT EXISTS (SELECT 1 FROM lease_waiters)
      AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.physical_id = c.physical_id AND l.state = 'active')
      -- A phone with a cleanup row and no active lease awaits, runs or failed its cleanup (cleanup/device-cleanups.ts): not free.
      AND NOT EXISTS (SELECT 1 FROM device_cleanup dc WHERE dc.physical_id = c.physical_id)
    ORDER BY c.n
    LIMIT 1
    ON CONFLICT (physical_id) WHERE state = 'active' DO NOTHING
    RETURNING physical_id, agent_id, serial`,
};
const RELEASE = {
  name: "farm_lease_release",
  // The holder rule in the statement ($3 null: anyone). Whether the lease has running sessions is read
  // in the same statement, so a release with none (most) costs no second round trip to end them.
  text: `
    UPDATE leases SET state = 'released', ended_at = $2
    WHERE token_hash = $1 AND state = 'active' AND ($3::text IS NULL OR holder = $3)
    RETURNING ${COLUMNS},
      -- has_sessions: set by a session's start in its statement (kysely-session-store.ts). A start that
      -- held this row when the release came is committed by the time the release reads the row again,
      -- and the mark shows it; the EXISTS alone reads this statement's snapshot, from before that commit
      -- (and it still finds sessions a replica of the previous version started without the mark).
      (has_sessions OR EXISTS (SELECT 1 FROM sessions s WHERE s.lease_id = leases.lease_id AND s.status = 'running')) AS running_sessions`,
};
const RENEW = {
  name: "farm_lease_renew",
  // $2: the new ttl, or null for the lease's own.
  text: `
    UPDATE leases SET ttl_ms = coalesce($2::bigint, ttl_ms), expires_at = $3::bigint + coalesce($2::bigint, ttl_ms)
    WHERE token_hash = $1 AND state = 'active' AND ($4::text IS NULL OR holder = $4)
    RETURNING ${COLUMNS}`,
};

type Raw = Record<string, unknown>;

/** A lease's columns as a LeaseRow has them (has_sessions is the store's own). */
const LEASE_ROW = {
  leaseId: leases.leaseId,
  tokenHash: leases.tokenHash,
  holder: leases.holder,
  physicalId: leases.physicalId,
  agentId: leases.agentId,
  serial: leases.serial,
  acquiredAt: leases.acquiredAt,
  expiresAt: leases.expiresAt,
  ttlMs: leases.ttlMs,
  state: leases.state,
  endedAt: leases.endedAt,
};

/** A row as the raw statements return it (int8 may come as text), in the store's shape. */
function leaseOf(r: Raw): LeaseRow {
  return {
    leaseId: String(r["lease_id"]),
    tokenHash: String(r["token_hash"]),
    holder: String(r["holder"]),
    physicalId: String(r["physical_id"]),
    agentId: String(r["agent_id"]),
    serial: String(r["serial"]),
    acquiredAt: Number(r["acquired_at"]),
    expiresAt: Number(r["expires_at"]),
    ttlMs: Number(r["ttl_ms"]),
    state: r["state"] as LeaseState,
    endedAt: r["ended_at"] === null ? null : Number(r["ended_at"]),
  };
}

/** The same text and values through drizzle, for a store bound to a transaction (no pool of its own). */
function bound(text: string, values: readonly unknown[]): SQL {
  return sql.join(text.split(/\$(\d+)/).map((part, i) => (i % 2 === 0 ? sql.raw(part) : sql`${values[Number(part) - 1]}`)));
}

/** Leases and the wait queue in the replicas' PostgreSQL database. */
export class PgLeaseStore implements LeaseStore {
  /** `pool`: where the hot statements run as named prepared statements; without it (a transaction's store) they go through `db`. */
  constructor(
    private readonly db: PgCoordinatorDb,
    private readonly pool?: pg.Pool,
  ) {}

  private async run(statement: { name: string; text: string }, values: unknown[]): Promise<Raw[]> {
    if (this.pool) return (await this.pool.query<Raw>({ name: statement.name, text: statement.text, values })).rows;
    return (await this.db.execute<Raw>(bound(statement.text, values))).rows;
  }

  activeLeases(): Promise<LeaseRow[]> {
    return this.db.select(LEASE_ROW).from(leases).where(eq(leases.state, "active"));
  }

  async leaseByTokenHash(tokenHash: string): Promise<LeaseRow | undefined> {
    const [row] = await this.db.select(LEASE_ROW).from(leases).where(eq(leases.tokenHash, tokenHash)).limit(1);
    return row;
  }

  async insertLease(lease: LeaseRow, grantedTicket?: string): Promise<void> {
    if (grantedTicket === undefined) {
      await this.db.insert(leases).values(lease);
      return;
    }
    await this.db.transaction(async (tx) => {
      await tx.insert(leases).values(lease);
      await tx.delete(leaseWaiters).where(eq(leaseWaiters.ticket, grantedTicket));
    });
  }

  async renewLease(leaseId: string, expiresAt: number, ttlMs: number): Promise<void> {
    await this.db.update(leases).set({ expiresAt, ttlMs }).where(eq(leases.leaseId, leaseId));
  }

  async endLease(leaseId: string, state: Exclude<LeaseState, "active">, endedAt: number): Promise<boolean> {
    const ended = await this.db
      .update(leases)
      .set({ state, endedAt })
      .where(and(eq(leases.leaseId, leaseId), eq(leases.state, "active")))
      .returning({ id: leases.leaseId });
    return ended.length > 0;
  }

  async insertLeaseOnAnyFree(lease: Omit<LeaseRow, "physicalId" | "agentId" | "serial">, candidates: readonly LeasePhone[]): Promise<LeasePhone | undefined> {
    if (candidates.length === 0) return undefined;
    const phones = JSON.stringify(candidates.map((c) => ({ p: c.physicalId, a: c.agentId, s: c.serial })));
    const [row] = await this.run(GRANT_AT_ONCE, [lease.leaseId, lease.tokenHash, lease.holder, lease.acquiredAt, lease.expiresAt, lease.ttlMs, phones]);
    return row ? { physicalId: String(row["physical_id"]), agentId: String(row["agent_id"]), serial: String(row["serial"]) } : undefined;
  }

  async releaseByTokenHash(tokenHash: string, endedAt: number, caller?: { tokenName: string; admin: boolean }): Promise<EndedLease | undefined> {
    const anyone = caller === undefined || caller.admin;
    const [row] = await this.run(RELEASE, [tokenHash, endedAt, anyone ? null : caller.tokenName]);
    return row && { ...leaseOf(row), runningSessions: row["running_sessions"] === true };
  }

  async renewByTokenHash(tokenHash: string, ttlMs: number, now: number, caller?: { tokenName: string; admin: boolean }): Promise<LeaseRow | undefined> {
    const anyone = caller === undefined || caller.admin;
    const [row] = await this.run(RENEW, [tokenHash, ttlMs > 0 ? ttlMs : null, now, anyone ? null : caller.tokenName]);
    return row && leaseOf(row);
  }

  async expireDue(now: number): Promise<LeaseRow[]> {
    return this.db
      .update(leases)
      .set({ state: "expired", endedAt: now })
      .where(and(eq(leases.state, "active"), lte(leases.expiresAt, now)))
      .returning(LEASE_ROW);
  }

  async activeLeaseOf(physicalId: string): Promise<LeaseRow | undefined> {
    // The partial unique index leases_one_active serves this.
    const [row] = await this.db.select(LEASE_ROW).from(leases).where(and(eq(leases.physicalId, physicalId), eq(leases.state, "active"))).limit(1);
    return row;
  }

  waiters(): Promise<Waiter[]> {
    return this.db.select().from(leaseWaiters).orderBy(asc(leaseWaiters.seq));
  }

  async insertWaiter(w: Waiter): Promise<void> {
    await this.db.insert(leaseWaiters).values(w);
  }

  async setWaiterCaller(ticket: string, replicaId: string | null, tokenHash: string | null): Promise<void> {
    await this.db.update(leaseWaiters).set({ replicaId, tokenHash }).where(eq(leaseWaiters.ticket, ticket));
  }

  async leaseById(leaseId: string): Promise<LeaseRow | undefined> {
    const [row] = await this.db.select(LEASE_ROW).from(leases).where(eq(leases.leaseId, leaseId)).limit(1);
    return row;
  }

  exclusive<T>(turn: (store: LeaseStore) => Promise<T>): Promise<T> {
    return this.db.transaction(async (tx) => {
      // Transaction-scoped: released by the commit or rollback, also when this process dies mid-turn.
      await tx.execute(sql`SELECT pg_advisory_xact_lock(${LEASE_LOCK})`);
      return turn(new PgLeaseStore(tx as unknown as PgCoordinatorDb));
    });
  }

  async deleteWaiter(ticket: string): Promise<void> {
    await this.db.delete(leaseWaiters).where(eq(leaseWaiters.ticket, ticket));
  }
}
