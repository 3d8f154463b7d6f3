import { and, asc, eq, lte, sql } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { leases, leaseWaiters } from "../db/pg-schema.js";
import type { LeasePhone, LeaseRow, LeaseState, LeaseStore, Waiter } from "./lease-store.js";

// The farm-wide lease lock's key ("leas"), distinct from the migration lock's.
const LEASE_LOCK = 0x6c656173;

/** Leases and the wait queue in the replicas' PostgreSQL database. */
export class PgLeaseStore implements LeaseStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  activeLeases(): Promise<LeaseRow[]> {
    return this.db.select().from(leases).where(eq(leases.state, "active"));
  }

  async leaseByTokenHash(tokenHash: string): Promise<LeaseRow | undefined> {
    const [row] = await this.db.select().from(leases).where(eq(leases.tokenHash, tokenHash)).limit(1);
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
    // One statement, no lock (PostgreSQL only: replicas grant concurrently; SQLite has one writer and
    // decides in one transaction). The caller passes the candidates from a random start, so replicas
    // granting at the same moment mostly try different phones; two that try the same one meet at the
    // unique index: one inserts, the other inserts nothing (DO NOTHING) and may try again.
    const res = await this.db.execute<{ physical_id: string; agent_id: string; serial: string }>(sql`
      INSERT INTO leases (lease_id, token_hash, holder, physical_id, agent_id, serial, acquired_at, expires_at, ttl_ms, state, ended_at)
      SELECT ${lease.leaseId}, ${lease.tokenHash}, ${lease.holder}, c.physical_id, c.agent_id, c.serial,
             ${lease.acquiredAt}, ${lease.expiresAt}, ${lease.ttlMs}, 'active', NULL
      FROM (SELECT e->>'p' AS physical_id, e->>'a' AS agent_id, e->>'s' AS serial, n
            FROM jsonb_array_elements(${JSON.stringify(candidates.map((c) => ({ p: c.physicalId, a: c.agentId, s: c.serial })))}::jsonb) WITH ORDINALITY AS t(e, n)) c
      WHERE NOT EXISTS (SELECT 1 FROM lease_waiters)
        AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.physical_id = c.physical_id AND l.state = 'active')
        -- A phone with a cleanup row and no active lease awaits, runs or failed its cleanup (cleanup/device-cleanups.ts): not free.
        AND NOT EXISTS (SELECT 1 FROM device_cleanup dc WHERE dc.physical_id = c.physical_id)
      ORDER BY c.n
      LIMIT 1
      ON CONFLICT (physical_id) WHERE state = 'active' DO NOTHING
      RETURNING physical_id, agent_id, serial`);
    const row = res.rows[0];
    return row ? { physicalId: row.physical_id, agentId: row.agent_id, serial: row.serial } : undefined;
  }

  async releaseByTokenHash(tokenHash: string, endedAt: number, caller?: { tokenName: string; admin: boolean }): Promise<LeaseRow | undefined> {
    const anyone = caller === undefined || caller.admin;
    const [row] = await this.db
      .update(leases)
      .set({ state: "released", endedAt })
      .where(and(eq(leases.tokenHash, tokenHash), eq(leases.state, "active"), anyone ? undefined : eq(leases.holder, caller.tokenName)))
      .returning();
    return row;
  }

  async renewByTokenHash(tokenHash: string, ttlMs: number, now: number, caller?: { tokenName: string; admin: boolean }): Promise<LeaseRow | undefined> {
    const anyone = caller === undefined || caller.admin;
    const ttl = ttlMs > 0 ? sql`${ttlMs}::bigint` : sql`${leases.ttlMs}`;
    const [row] = await this.db
      .update(leases)
      .set({ ttlMs: sql`${ttl}`, expiresAt: sql`${now}::bigint + ${ttl}` })
      .where(and(eq(leases.tokenHash, tokenHash), eq(leases.state, "active"), anyone ? undefined : eq(leases.holder, caller.tokenName)))
      .returning();
    return row;
  }

  async expireDue(now: number): Promise<LeaseRow[]> {
    return this.db
      .update(leases)
      .set({ state: "expired", endedAt: now })
      .where(and(eq(leases.state, "active"), lte(leases.expiresAt, now)))
      .returning();
  }

  async activeLeaseOf(physicalId: string): Promise<LeaseRow | undefined> {
    // The partial unique index leases_one_active serves this.
    const [row] = await this.db.select().from(leases).where(and(eq(leases.physicalId, physicalId), eq(leases.state, "active"))).limit(1);
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
    const [row] = await this.db.select().from(leases).where(eq(leases.leaseId, leaseId)).limit(1);
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
