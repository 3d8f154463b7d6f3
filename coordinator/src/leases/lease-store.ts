import type { Selector } from "./selector.js";

export type LeaseState = "active" | "released" | "expired";

/** A lease as stored; at most one per physical device is active. */
export interface LeaseRow {
  leaseId: string;
  /** sha256 of the lease token; the token itself is never stored. */
  tokenHash: string;
  holder: string;
  physicalId: string;
  agentId: string;
  serial: string;
  acquiredAt: number;
  expiresAt: number;
  ttlMs: number;
  state: LeaseState;
  endedAt: number | null;
}

/** A waiting acquire request as stored: what survives a restart (the waiting call itself does not). */
export interface Waiter {
  ticket: string;
  /** Arrival order. */
  seq: number;
  holder: string;
  selector: Selector;
  enqueuedAt: number;
  waitDeadline: number;
  ttlMs: number;
}

/** The stored wait queue. */
export interface WaiterStore {
  /** Every waiter, in arrival order. */
  waiters(): Waiter[];
  insertWaiter(w: Waiter): void;
  deleteWaiter(ticket: string): void;
}

/** Where leases and the wait queue are kept. Each method is one atomic write. */
export interface LeaseStore extends WaiterStore {
  activeLeases(): LeaseRow[];
  /** Any lease, active or ended, by its token's hash. */
  leaseByTokenHash(tokenHash: string): LeaseRow | undefined;
  /**
   * Stores a new active lease and, in the same transaction, drops the
   * waiter it was granted to. Fails (storing nothing) when the device
   * already has an active lease.
   */
  insertLease(lease: LeaseRow, grantedTicket?: string): void;
  renewLease(leaseId: string, expiresAt: number, ttlMs: number): void;
  endLease(leaseId: string, state: Exclude<LeaseState, "active">, endedAt: number): void;
}
