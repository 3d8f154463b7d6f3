import type { LeaseRow, Waiter, WaiterStore } from "./lease-store.js";

/** How long a waiter from before a coordinator restart keeps its place for its client to come back. */
export const RESUME_GRACE_MS = 30_000;

/** What a waiting call is handed: the committed lease, and the token only its caller ever sees. */
export interface Grant {
  lease: LeaseRow;
  token: string;
}

/** A client call waiting on a waiter. Lives only in this process. */
export interface PendingCall {
  /** The lease token this caller gets when its place is granted (only its hash is stored, on the waiter). */
  readonly token: string;
  /** Whether the caller has gone (its call ended): it must not be granted. */
  gone(): boolean;
  /** Hands the grant over; false when the caller is gone (the grant must be undone). */
  deliver(grant: Grant): boolean;
  /** Ends the call with an error. */
  fail(err: Error): void;
}

/**
 * The lease wait queue: stored waiter rows in arrival order, and beside
 * them the calls waiting on them now. The rows survive a restart; the calls
 * do not, so a restored waiter is kept for its client to come back (with
 * the same ticket) until RESUME_GRACE_MS after the restart.
 */
export class WaitQueue {
  private rows: Waiter[] = [];
  private readonly calls = new Map<string, PendingCall>();
  /** Restored waiters no call has come back for yet: dropped at this time. */
  private readonly orphans = new Map<string, number>();
  private seq = 0;

  private constructor(
    private store: WaiterStore,
    stored: readonly Waiter[],
    now: number,
  ) {
    for (const w of stored) {
      this.rows.push(w);
      this.orphans.set(w.ticket, Math.min(w.waitDeadline, now + RESUME_GRACE_MS));
      this.seq = Math.max(this.seq, w.seq);
    }
    this.rows.sort((a, b) => a.seq - b.seq);
  }

  /** The stored queue, restored: its waiters keep their places for their clients to come back. */
  static async open(store: WaiterStore, now: number): Promise<WaitQueue> {
    return new WaitQueue(store, await store.waiters(), now);
  }

  /** Writes go to this store from now on (the transaction of the current turn, on PostgreSQL). */
  bind(store: WaiterStore): void {
    this.store = store;
  }

  /**
   * Takes the stored rows as the truth (another replica may have changed
   * them): calls stay with their tickets; a row nobody waits on (no call
   * here, and no live replica named on it) is kept for its client to come
   * back until RESUME_GRACE_MS from now. Returns whether the rows changed.
   */
  replaceRows(stored: readonly Waiter[], now: number, heldElsewhere: (w: Waiter) => boolean): boolean {
    const before = this.rows.map((w) => `${w.ticket}@${w.replicaId ?? ""}`).join(",");
    this.rows = [...stored].sort((a, b) => a.seq - b.seq);
    const tickets = new Set(this.rows.map((w) => w.ticket));
    for (const t of [...this.orphans.keys()]) if (!tickets.has(t)) this.orphans.delete(t);
    for (const w of this.rows) {
      this.seq = Math.max(this.seq, w.seq);
      if (this.calls.has(w.ticket) || heldElsewhere(w)) this.orphans.delete(w.ticket);
      else if (!this.orphans.has(w.ticket)) this.orphans.set(w.ticket, Math.min(w.waitDeadline, now + RESUME_GRACE_MS));
    }
    return before !== this.rows.map((w) => `${w.ticket}@${w.replicaId ?? ""}`).join(",");
  }

  /** Records the caller now waiting on this ticket: its replica and the hash of its token. */
  async moveTo(w: Waiter, replicaId: string | null, tokenHash: string): Promise<void> {
    await this.store.setWaiterCaller(w.ticket, replicaId, tokenHash);
    w.replicaId = replicaId;
    w.tokenHash = tokenHash;
  }

  /** Calls of this process whose place is no longer queued (another replica granted or dropped it). */
  unqueuedCalls(): [ticket: string, call: PendingCall][] {
    const tickets = new Set(this.rows.map((w) => w.ticket));
    return [...this.calls.entries()].filter(([t]) => !tickets.has(t));
  }

  /** Whether a caller of this process waits on any ticket. */
  hasCalls(): boolean {
    return this.calls.size > 0;
  }

  get size(): number {
    return this.rows.length;
  }

  /** Every waiter, oldest first (a copy). */
  list(): Waiter[] {
    return [...this.rows];
  }

  find(ticket: string): Waiter | undefined {
    return this.rows.find((w) => w.ticket === ticket);
  }

  has(w: Waiter): boolean {
    return this.rows.includes(w);
  }

  /** Stores a new waiter at the end of the queue. */
  async enqueue(fields: Omit<Waiter, "seq">): Promise<Waiter> {
    // Taken before the write: two enqueues in flight never share a place.
    const w: Waiter = { ...fields, seq: ++this.seq };
    try {
      await this.store.insertWaiter(w);
    } catch (err) {
      if (this.seq === w.seq) this.seq--;
      throw err;
    }
    this.rows.push(w);
    return w;
  }

  /** Drops a waiter from the store and the queue; false when it was not queued. */
  async remove(w: Waiter): Promise<boolean> {
    if (!this.has(w)) return false;
    await this.store.deleteWaiter(w.ticket);
    if (!this.has(w)) return false;
    this.forget(w);
    return true;
  }

  /** Drops a waiter the store already dropped (with the lease granted to it). */
  granted(w: Waiter): void {
    this.forget(w);
  }

  /** Makes `call` the one waiting on this ticket; returns the call it replaces, if any. */
  attach(ticket: string, call: PendingCall): PendingCall | undefined {
    const previous = this.calls.get(ticket);
    this.calls.set(ticket, call);
    this.orphans.delete(ticket);
    return previous === call ? undefined : previous;
  }

  /** Forgets `call` if it is still the one waiting on this ticket. */
  detach(ticket: string, call: PendingCall): void {
    if (this.calls.get(ticket) === call) this.calls.delete(ticket);
  }

  callOf(ticket: string): PendingCall | undefined {
    return this.calls.get(ticket);
  }

  /** Waiters past their wait deadline, or restored ones whose client did not come back in time. */
  due(now: number): Waiter[] {
    return this.rows.filter((w) => {
      const orphanUntil = this.orphans.get(w.ticket);
      return w.waitDeadline <= now || (orphanUntil !== undefined && orphanUntil <= now);
    });
  }

  /**
   * Ends every waiting call with `err` and keeps the stored queue: what a
   * stopping process does, so that the next one resumes it.
   */
  abandon(err: Error): void {
    for (const call of [...this.calls.values()]) call.fail(err);
    this.calls.clear();
  }

  private forget(w: Waiter): void {
    this.rows = this.rows.filter((x) => x !== w);
    this.orphans.delete(w.ticket);
  }
}
