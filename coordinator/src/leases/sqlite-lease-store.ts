import { and, asc, eq, lte, sql } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { leases, leaseWaiters, deviceCleanup } from "../db/schema.js";
import type { LeasePhone, LeaseRow, LeaseState, LeaseStore, Waiter } from "./lease-store.js";

/** Leases and the wait queue in the coordinator's SQLite database. */
export class SqliteLeaseStore implements LeaseStore {
  constructor(private readonly db: CoordinatorDb) {}

  async activeLeases(): Promise<LeaseRow[]> {
    return this.db.select().from(leases).where(eq(leases.state, "active")).all();
  }

  async leaseByTokenHash(tokenHash: string): Promise<LeaseRow | undefined> {
    return this.db.select().from(leases).where(eq(leases.tokenHash, tokenHash)).get();
  }

  async insertLease(lease: LeaseRow, grantedTicket?: string): Promise<void> {
    if (grantedTicket === undefined) {
      this.db.insert(leases).values(lease).run();
      return;
    }
    this.db.transaction((tx) => {
      tx.insert(leases).values(lease).run();
      tx.delete(leaseWaiters).where(eq(leaseWaiters.ticket, grantedTicket)).run();
    });
  }

  async renewLease(leaseId: string, expiresAt: number, ttlMs: number): Promise<void> {
    this.db.update(leases).set({ expiresAt, ttlMs }).where(eq(leases.leaseId, leaseId)).run();
  }

  async endLease(leaseId: string, state: Exclude<LeaseState, "active">, endedAt: number): Promise<boolean> {
    return this.db.update(leases).set({ state, endedAt }).where(and(eq(leases.leaseId, leaseId), eq(leases.state, "active"))).run().changes > 0;
  }

  async insertLeaseOnAnyFree(lease: Omit<LeaseRow, "physicalId" | "agentId" | "serial">, candidates: readonly LeasePhone[]): Promise<LeasePhone | undefined> {
    // SQLite has one writer (one coordinator): a transaction that reads then writes is the same decision.
    return this.db.transaction((tx) => {
      if (tx.select({ t: leaseWaiters.ticket }).from(leaseWaiters).limit(1).get()) return undefined;
      for (const c of candidates) {
        if (tx.select({ id: leases.leaseId }).from(leases).where(and(eq(leases.physicalId, c.physicalId), eq(leases.state, "active"))).get()) continue;
        // A cleanup row and no active lease: its cleanup is due, running or failed (cleanup/device-cleanups.ts).
        if (tx.select({ id: deviceCleanup.physicalId }).from(deviceCleanup).where(eq(deviceCleanup.physicalId, c.physicalId)).get()) continue;
        tx.insert(leases).values({ ...lease, ...c }).run();
        return c;
      }
      return undefined;
    });
  }

  async releaseByTokenHash(tokenHash: string, endedAt: number, caller?: { tokenName: string; admin: boolean }): Promise<LeaseRow | undefined> {
    const anyone = caller === undefined || caller.admin;
    return this.db
      .update(leases)
      .set({ state: "released", endedAt })
      .where(and(eq(leases.tokenHash, tokenHash), eq(leases.state, "active"), anyone ? undefined : eq(leases.holder, caller.tokenName)))
      .returning()
      .get();
  }

  async renewByTokenHash(tokenHash: string, ttlMs: number, now: number, caller?: { tokenName: string; admin: boolean }): Promise<LeaseRow | undefined> {
    const anyone = caller === undefined || caller.admin;
    const ttl = ttlMs > 0 ? sql`${ttlMs}` : sql`${leases.ttlMs}`;
    return this.db
      .update(leases)
      .set({ ttlMs: sql`${ttl}`, expiresAt: sql`${now} + ${ttl}` })
      .where(and(eq(leases.tokenHash, tokenHash), eq(leases.state, "active"), anyone ? undefined : eq(leases.holder, caller.tokenName)))
      .returning()
      .get();
  }

  async expireDue(now: number): Promise<LeaseRow[]> {
    return this.db
      .update(leases)
      .set({ state: "expired", endedAt: now })
      .where(and(eq(leases.state, "active"), lte(leases.expiresAt, now)))
      .returning()
      .all();
  }

  async activeLeaseOf(physicalId: string): Promise<LeaseRow | undefined> {
    return this.db.select().from(leases).where(and(eq(leases.physicalId, physicalId), eq(leases.state, "active"))).get();
  }

  async waiters(): Promise<Waiter[]> {
    return this.db.select().from(leaseWaiters).orderBy(asc(leaseWaiters.seq)).all();
  }

  async insertWaiter(w: Waiter): Promise<void> {
    this.db.insert(leaseWaiters).values(w).run();
  }

  async setWaiterCaller(ticket: string, replicaId: string | null, tokenHash: string | null): Promise<void> {
    this.db.update(leaseWaiters).set({ replicaId, tokenHash }).where(eq(leaseWaiters.ticket, ticket)).run();
  }

  async leaseById(leaseId: string): Promise<LeaseRow | undefined> {
    return this.db.select().from(leases).where(eq(leases.leaseId, leaseId)).get();
  }

  exclusive<T>(turn: (store: LeaseStore) => Promise<T>): Promise<T> {
    return turn(this);
  }

  async deleteWaiter(ticket: string): Promise<void> {
    this.db.delete(leaseWaiters).where(eq(leaseWaiters.ticket, ticket)).run();
  }
}
