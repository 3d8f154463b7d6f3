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

/** A lease a release ended, with what the statement also saw of its sessions (PostgreSQL; undefined: not read). */
export type EndedLease = LeaseRow & { runningSessions?: boolean };

/** The phone a lease is on. */
export interface LeasePhone {
  physicalId: string;
  agentId: string;
  serial: string;
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
  /** The coordinator replica whose caller waits on it; null when none does (restored, until the caller asks again). */
  replicaId: string | null;
  /**
   * sha256 of the lease token its waiting caller will get (made by the
   * caller's replica, which alone knows the token): whichever replica grants
   * the place stores it on the lease. Null while nobody waits on it.
   */
  tokenHash: string | null;
}

/** The stored wait queue. */
export interface WaiterStore {
  /** Every waiter, in arrival order. */
  waiters(): Promise<Waiter[]>;
  insertWaiter(w: Waiter): Promise<void>;
  deleteWaiter(ticket: string): Promise<void>;
  /** The replica (and the hash of the token) of the caller now waiting on this ticket: a client that came back, perhaps through another replica. */
  setWaiterCaller(ticket: string, replicaId: string | null, tokenHash: string | null): Promise<void>;
}

/** Where leases and the wait queue are kept. Each method is one atomic write. */
export interface LeaseStore extends WaiterStore {
  activeLeases(): Promise<LeaseRow[]>;
  /** Any lease, active or ended, by its token's hash. */
  leaseByTokenHash(tokenHash: string): Promise<LeaseRow | undefined>;
  /**
   * Stores a new active lease and, in the same transaction, drops the
   * waiter it was granted to. Fails (storing nothing) when the device
   * already has an active lease.
   */
  insertLease(lease: LeaseRow, grantedTicket?: string): Promise<void>;
  renewLease(leaseId: string, expiresAt: number, ttlMs: number): Promise<void>;
  /** Ends an active lease; false when it had already ended (another replica expired or released it). */
  endLease(leaseId: string, state: Exclude<LeaseState, "active">, endedAt: number): Promise<boolean>;
  /**
   * Grants one phone of `candidates` (tried in the order given) in one
   * statement, no lock: only while nobody waits in the queue, and only a
   * phone the database shows without an active lease. Returns the phone
   * taken, or undefined (none free, someone queued, or a race lost).
   */
  insertLeaseOnAnyFree(lease: Omit<LeaseRow, "physicalId" | "agentId" | "serial">, candidates: readonly LeasePhone[]): Promise<LeasePhone | undefined>;
  /**
   * Ends the active lease with this token hash in one statement, only for
   * its holder or an admin (`caller` undefined: anyone). Returns the ended
   * row, or undefined (none active, or held by another).
   */
  releaseByTokenHash(tokenHash: string, endedAt: number, caller?: { tokenName: string; admin: boolean }): Promise<EndedLease | undefined>;
  /**
   * Renews the active lease with this token hash in one statement, only for
   * its holder or an admin (`caller` undefined: anyone): it now expires
   * `ttlMs` (0: its own ttl) after `now`. Undefined when none is active or
   * it is another's.
   */
  renewByTokenHash(tokenHash: string, ttlMs: number, now: number, caller?: { tokenName: string; admin: boolean }): Promise<LeaseRow | undefined>;
  /** Expires every active lease due by `now` in one statement; returns those it ended. */
  expireDue(now: number): Promise<LeaseRow[]>;
  /** The active lease on a phone, as stored (one indexed read). */
  activeLeaseOf(physicalId: string): Promise<LeaseRow | undefined>;
  leaseById(leaseId: string): Promise<LeaseRow | undefined>;
  /**
   * Runs `turn` as the only change to leases and the queue anywhere: on
   * PostgreSQL one transaction holding the farm-wide lease lock, so replicas
   * decide in turn, each on what the one before committed; `turn` gets the
   * store bound to that transaction. On SQLite (one process, which already
   * runs its changes in turn) each write commits by itself.
   */
  exclusive<T>(turn: (store: LeaseStore) => Promise<T>): Promise<T>;
}
