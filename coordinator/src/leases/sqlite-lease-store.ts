import { asc, eq } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { leases, leaseWaiters } from "../db/schema.js";
import type { LeaseRow, LeaseState, LeaseStore, Waiter } from "./lease-store.js";

/** Leases and the wait queue in the coordinator's SQLite database. */
export class SqliteLeaseStore implements LeaseStore {
  constructor(private readonly db: CoordinatorDb) {}

  activeLeases(): LeaseRow[] {
    return this.db.select().from(leases).where(eq(leases.state, "active")).all();
  }

  leaseByTokenHash(tokenHash: string): LeaseRow | undefined {
    return this.db.select().from(leases).where(eq(leases.tokenHash, tokenHash)).get();
  }

  insertLease(lease: LeaseRow, grantedTicket?: string): void {
    if (grantedTicket === undefined) {
      this.db.insert(leases).values(lease).run();
      return;
    }
    this.db.transaction((tx) => {
      tx.insert(leases).values(lease).run();
      tx.delete(leaseWaiters).where(eq(leaseWaiters.ticket, grantedTicket)).run();
    });
  }

  renewLease(leaseId: string, expiresAt: number, ttlMs: number): void {
    this.db.update(leases).set({ expiresAt, ttlMs }).where(eq(leases.leaseId, leaseId)).run();
  }

  endLease(leaseId: string, state: Exclude<LeaseState, "active">, endedAt: number): void {
    this.db.update(leases).set({ state, endedAt }).where(eq(leases.leaseId, leaseId)).run();
  }

  waiters(): Waiter[] {
    return this.db.select().from(leaseWaiters).orderBy(asc(leaseWaiters.seq)).all();
  }

  insertWaiter(w: Waiter): void {
    this.db.insert(leaseWaiters).values(w).run();
  }

  deleteWaiter(ticket: string): void {
    this.db.delete(leaseWaiters).where(eq(leaseWaiters.ticket, ticket)).run();
  }
}
