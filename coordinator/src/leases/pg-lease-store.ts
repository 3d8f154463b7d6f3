import { and, asc, eq, sql } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { leases, leaseWaiters } from "../db/pg-schema.js";
import type { LeaseRow, LeaseState, LeaseStore, Waiter } from "./lease-store.js";

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

  async insertLeaseIfFree(lease: LeaseRow): Promise<boolean> {
    // One statement: nobody queued, and the unique index on active leases refuses a taken phone.
    const res = await this.db.execute(sql`
      INSERT INTO leases (lease_id, token_hash, holder, physical_id, agent_id, serial, acquired_at, expires_at, ttl_ms, state, ended_at)
      SELECT ${lease.leaseId}, ${lease.tokenHash}, ${lease.holder}, ${lease.physicalId}, ${lease.agentId}, ${lease.serial},
             ${lease.acquiredAt}, ${lease.expiresAt}, ${lease.ttlMs}, 'active', NULL
      WHERE NOT EXISTS (SELECT 1 FROM lease_waiters)
      ON CONFLICT (physical_id) WHERE state = 'active' DO NOTHING`);
    return (res.rowCount ?? 0) > 0;
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
