import { EventEmitter } from "node:events";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import type { DeviceLabels } from "../devices/device-labels.js";
import { readPage, type Page, type PageRequest } from "../paging.js";
import type { Candidate, Registry } from "../registry/registry.js";
import type { LeaseRow, LeaseStore, Waiter } from "./lease-store.js";
import { describeSelector, validateSelector, type Selector } from "./selector.js";
import { WaitQueue, type Grant, type PendingCall } from "./wait-queue.js";

export { RESUME_GRACE_MS, type Grant } from "./wait-queue.js";

export const DEFAULT_TTL_MS = 5 * 60_000;
export const MAX_TTL_MS = 24 * 3_600_000;
export const MAX_WAIT_MS = 24 * 3_600_000;

/** What changed, for live watchers (dashboards). */
export interface LeaseEvents {
  /** A lease was granted or renewed. */
  lease: [lease: LeaseRow];
  /** A lease was released or expired (its state says which). */
  leaseEnded: [lease: LeaseRow];
  /** The wait queue changed: every waiter, oldest first. */
  queue: [waiters: Waiter[]];
}

/** Who changes a label, for the holder rule. */
export interface LabelCaller {
  tokenName: string;
  admin: boolean;
  leaseToken: string | null;
}

const hash = (token: string) => createHash("sha256").update(token).digest("hex");

/**
 * Leases: one active lease per physical device (all its serials), granted
 * FIFO among the waiting requests that match a freed device. A grant is
 * committed before it is handed out; a waiter whose call ended is removed
 * before it can be granted; an unrenewed lease expires and frees the device.
 * Leases and the queue are in the store and survive a restart.
 *
 * Grants happen when `dispatch()` runs: the coordinator calls it whenever
 * the registry or the labels change (a device may have come free or started
 * to match).
 */
export class LeaseManager {
  readonly events = new EventEmitter<LeaseEvents>();
  private readonly active = new Map<string, LeaseRow>();
  private readonly byToken = new Map<string, LeaseRow>();
  private readonly queue: WaitQueue;
  private dispatching = false;
  private dispatchAgain = false;

  constructor(
    private readonly store: LeaseStore,
    private readonly registry: Registry,
    private readonly labels: DeviceLabels,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    for (const row of store.activeLeases()) {
      this.active.set(row.physicalId, row);
      this.byToken.set(row.tokenHash, row);
    }
    this.queue = new WaitQueue(store, this.now());
  }

  /**
   * Waits for a matching device. Resolves with a committed grant, or rejects
   * when the wait deadline passes or `signal` aborts (the client went away).
   */
  acquire(holder: string, selector: Selector, opts: { waitMs: number; ttlMs: number; ticket: string; signal: AbortSignal }): Promise<Grant> {
    validateSelector(selector);
    if (opts.ttlMs < 1_000 || opts.ttlMs > MAX_TTL_MS) throw invalidArgument("ttl", `ttl must be within 1s..24h, got ${opts.ttlMs} ms`);
    if (opts.waitMs < 0 || opts.waitMs > MAX_WAIT_MS) throw invalidArgument("wait", "wait must be within 0..24h");
    if (selector.serial && !this.registry.physicalIdOf(selector.serial)) {
      throw farmError(Errors.DEVICE_NOT_FOUND, `no agent reports a device with serial ${selector.serial}`, "device");
    }
    const ticket = opts.ticket || randomUUID();
    return new Promise((resolve, reject) => {
      let waiter = this.queue.find(ticket);
      if (waiter && waiter.holder !== holder) return reject(farmError(Errors.PERMISSION_DENIED, "that ticket belongs to another caller", "ticket"));
      if (!waiter) {
        // Nobody is waiting ahead: grant at once without queueing.
        if (this.queue.size === 0 && !opts.signal.aborted) {
          const route = this.pick(this.registry.candidates(), selector);
          if (route) return resolve(this.grant(holder, opts.ttlMs, route));
        }
        const now = this.now();
        waiter = this.queue.enqueue({ ticket, holder, selector, enqueuedAt: now, waitDeadline: now + opts.waitMs, ttlMs: opts.ttlMs });
        this.queueChanged();
      }
      const w = waiter;
      const timer = setTimeout(() => this.sweep(), Math.max(0, w.waitDeadline - this.now()) + 5);
      let settled = false;
      const end = () => {
        settled = true;
        clearTimeout(timer);
        opts.signal.removeEventListener("abort", onAbort);
        this.queue.detach(w.ticket, call);
      };
      const call: PendingCall = {
        gone: () => opts.signal.aborted,
        deliver: (grant) => {
          if (opts.signal.aborted) return false;
          end();
          resolve(grant);
          return true;
        },
        fail: (e) => {
          end();
          reject(e);
        },
      };
      const onAbort = () => {
        // The client is gone: it must never be granted.
        this.removeWaiter(w);
        end();
        reject(farmError(Errors.LEASE_WAIT_CANCELLED, "the caller stopped waiting"));
      };
      // The same ticket again (a client that reconnected): the newer call takes the place over, and the
      // older one ends now (its abort can no longer drop the place).
      this.queue.attach(w.ticket, call)?.fail(farmError(Errors.LEASE_WAIT_CANCELLED, "a newer call with the same ticket took this one's place"));
      if (opts.signal.aborted) return onAbort();
      opts.signal.addEventListener("abort", onAbort, { once: true });
      this.dispatch();
      // Not granted at once and not willing to wait: fail now.
      if (!settled && opts.waitMs === 0) {
        this.removeWaiter(w);
        end();
        reject(farmError(Errors.NO_DEVICE_AVAILABLE, `no free device matches ${describeSelector(selector)}`));
      }
    });
  }

  renew(token: string, ttlMs: number): LeaseRow {
    const lease = this.byToken.get(hash(token));
    if (!lease) throw this.unknownToken(token);
    const ttl = ttlMs || lease.ttlMs;
    if (ttl < 1_000 || ttl > MAX_TTL_MS) throw invalidArgument("ttl", "ttl must be within 1s..24h");
    const expiresAt = this.now() + ttl;
    this.store.renewLease(lease.leaseId, expiresAt, ttl);
    lease.expiresAt = expiresAt;
    lease.ttlMs = ttl;
    this.events.emit("lease", lease);
    return lease;
  }

  release(token: string): LeaseRow {
    const lease = this.byToken.get(hash(token));
    if (!lease) throw this.unknownToken(token);
    this.end(lease, "released");
    this.dispatch();
    return lease;
  }

  /** Every active lease and the whole queue: for the coordinator itself (the API reads pages). */
  list(): { leases: LeaseRow[]; queue: Waiter[] } {
    return { leases: [...this.active.values()].sort(byAcquired), queue: this.queue.list() };
  }

  /**
   * One page of active leases, oldest first by (acquired time, lease id):
   * unique, and stable because a renewal does not change it. The queue is
   * not paged: it comes whole with the first page (no page token) and is
   * empty on the others, so a caller reading every page sees it once.
   */
  listPage(page: PageRequest): { leases: Page<LeaseRow>; queue: Waiter[] } {
    const leases = readPage(page, { list: "leases" }, ["number", "string"] as const, (l: LeaseRow) => [l.acquiredAt, l.leaseId] as const, (after, limit) =>
      // One lease per leased phone: a filter and a sort of those is cheap next to the response.
      [...this.active.values()]
        .filter((l) => !after || l.acquiredAt > after[0] || (l.acquiredAt === after[0] && l.leaseId > after[1]))
        .sort(byAcquired)
        .slice(0, limit),
    );
    return { leases, queue: page.pageToken === "" ? this.queue.list() : [] };
  }

  /**
   * May this caller change this phone? Mutations need the caller's lease on
   * the physical device, whichever of its serials they name.
   */
  authorize(physicalId: string, leaseToken: string | null): LeaseRow {
    const lease = this.active.get(physicalId);
    const refused = { dispatched: false, ambiguous: false };
    if (!lease) throw farmError(Errors.LEASE_REQUIRED, `changing device ${physicalId} needs a lease on it (farm lease acquire, or FARM_LEASE)`, "lease", refused);
    if (!leaseToken || hash(leaseToken) !== lease.tokenHash) {
      throw farmError(
        Errors.LEASE_HELD_BY_OTHER,
        `device ${physicalId} is leased by ${lease.holder} until ${new Date(lease.expiresAt).toISOString()}`,
        "lease",
        refused,
      );
    }
    return lease;
  }

  /**
   * A leased phone is its holder's: what hangs off the lease (labels,
   * recordings, app forwards) changes only by the holder (its token name, or
   * its lease token presented) or an admin. An unleased phone is anyone's.
   */
  requireHolder(physicalId: string, caller: { tokenName: string; admin: boolean }, leaseToken: string | null, what: string): void {
    const lease = this.active.get(physicalId);
    if (!lease || caller.admin || this.holds(lease, caller.tokenName, leaseToken)) return;
    throw farmError(
      Errors.LEASE_HELD_BY_OTHER,
      `device ${physicalId} is leased by ${lease.holder} until ${new Date(lease.expiresAt).toISOString()}; only the holder or an admin may ${what}`,
      "lease",
      { dispatched: false, ambiguous: false },
    );
  }

  /** Whether this caller holds the phone's active lease. */
  isHolder(physicalId: string, tokenName: string, leaseToken: string | null): boolean {
    const lease = this.active.get(physicalId);
    return lease !== undefined && this.holds(lease, tokenName, leaseToken);
  }

  leaseOf(physicalId: string): LeaseRow | undefined {
    return this.active.get(physicalId);
  }

  /** Sets labels on the phone behind a serial; while it is leased, only its holder or an admin may (without `caller`: no check). */
  setLabels(serial: string, labels: Record<string, string>, caller?: LabelCaller): { physicalId: string; labels: Record<string, string> } {
    const physicalId = this.requirePhysical(serial);
    if (caller) this.requireHolder(physicalId, caller, caller.leaseToken, "change its labels");
    return { physicalId, labels: this.labels.set(physicalId, labels) };
  }

  removeLabel(serial: string, key: string, caller?: LabelCaller): { physicalId: string; labels: Record<string, string> } {
    const physicalId = this.requirePhysical(serial);
    if (caller) this.requireHolder(physicalId, caller, caller.leaseToken, "change its labels");
    return { physicalId, labels: this.labels.remove(physicalId, key) };
  }

  /** One page of labelled physical devices, by physical id. */
  labelsPage(page: PageRequest): Page<{ physicalId: string; labels: Record<string, string> }> {
    return this.labels.listPage(page);
  }

  /** Expires leases, drops waiters past their deadline, then grants. */
  sweep(): void {
    const now = this.now();
    const expired = [...this.active.values()].filter((l) => l.expiresAt <= now);
    for (const l of expired) {
      this.end(l, "expired");
      this.log.info("lease expired", { leaseId: l.leaseId, holder: l.holder, physicalId: l.physicalId });
    }
    for (const w of this.queue.due(now)) {
      const call = this.queue.callOf(w.ticket);
      this.removeWaiter(w);
      call?.fail(farmError(Errors.LEASE_WAIT_TIMEOUT, `no matching device came free before the wait ended (${describeSelector(w.selector)})`));
    }
    this.dispatch();
  }

  /** Grants free matching devices to waiters, oldest first. */
  dispatch(): void {
    if (this.dispatching) {
      this.dispatchAgain = true;
      return;
    }
    this.dispatching = true;
    try {
      do {
        this.dispatchAgain = false;
        if (this.queue.size === 0) return;
        const candidates = this.registry.candidates();
        for (const w of this.queue.list()) {
          const call = this.queue.callOf(w.ticket);
          // No call: restored, until its client comes back. A gone call: its abort handler is about to drop it.
          if (!call || call.gone()) continue;
          const route = this.pick(candidates, w.selector);
          if (!route) continue;
          const grant = this.grant(w.holder, w.ttlMs, route, w);
          if (!call.deliver(grant)) {
            // Committed, but nobody is there to receive it: back to the pool.
            this.end(grant.lease, "released");
            this.dispatchAgain = true;
          }
        }
      } while (this.dispatchAgain);
    } finally {
      this.dispatching = false;
    }
  }

  /**
   * Ends every waiting call with `err` and keeps the stored queue, as a
   * process that stops does: the next one resumes the queue.
   */
  abandonCalls(err: Error): void {
    this.queue.abandon(err);
  }

  /** The first free candidate (in agent, serial order) the selector accepts. */
  private pick(candidates: Candidate[], s: Selector): Candidate | undefined {
    for (const r of candidates) {
      if (this.active.has(r.physicalId)) continue;
      if (s.physicalId && s.physicalId !== r.physicalId) continue;
      if (s.serial && r.serial !== s.serial) continue;
      if (s.agent && r.agentId !== s.agent && r.agentName !== s.agent) continue;
      if (s.model && r.model !== s.model) continue;
      if (s.apiLevelMin && r.apiLevel < s.apiLevelMin) continue;
      if (s.apiLevelMax && r.apiLevel > s.apiLevelMax) continue;
      if (!this.labels.matches(r.physicalId, s.labels)) continue;
      return r;
    }
    return undefined;
  }

  /** Commits a lease (with the waiter's removal, when it was queued) before anyone is told. */
  private grant(holder: string, ttlMs: number, route: Candidate, waiter?: Waiter): Grant {
    const token = `farml_${randomBytes(24).toString("base64url")}`;
    const now = this.now();
    const lease: LeaseRow = {
      leaseId: randomUUID(),
      tokenHash: hash(token),
      holder,
      physicalId: route.physicalId,
      agentId: route.agentId,
      serial: route.serial,
      acquiredAt: now,
      expiresAt: now + ttlMs,
      ttlMs,
      state: "active",
      endedAt: null,
    };
    const queued = waiter !== undefined && this.queue.has(waiter);
    this.store.insertLease(lease, queued ? waiter.ticket : undefined);
    if (queued) this.queue.granted(waiter);
    this.active.set(lease.physicalId, lease);
    this.byToken.set(lease.tokenHash, lease);
    this.events.emit("lease", lease);
    if (queued) this.queueChanged();
    return { lease, token };
  }

  private end(lease: LeaseRow, state: "released" | "expired"): void {
    if (this.active.get(lease.physicalId) !== lease) return;
    const endedAt = this.now();
    this.store.endLease(lease.leaseId, state, endedAt);
    this.active.delete(lease.physicalId);
    this.byToken.delete(lease.tokenHash);
    lease.state = state;
    lease.endedAt = endedAt;
    this.events.emit("leaseEnded", lease);
  }

  private removeWaiter(w: Waiter): void {
    if (this.queue.remove(w)) this.queueChanged();
  }

  private queueChanged(): void {
    if (this.events.listenerCount("queue") > 0) this.events.emit("queue", this.queue.list());
  }

  private holds(lease: LeaseRow, tokenName: string, leaseToken: string | null): boolean {
    return lease.holder === tokenName || (leaseToken !== null && leaseToken !== "" && hash(leaseToken) === lease.tokenHash);
  }

  private unknownToken(token: string): Error {
    const row = this.store.leaseByTokenHash(hash(token));
    if (row?.state === "expired") return farmError(Errors.LEASE_EXPIRED, `lease ${row.leaseId} expired at ${new Date(row.expiresAt).toISOString()}; acquire a new one`, "lease");
    if (row?.state === "released") return farmError(Errors.LEASE_RELEASED, `lease ${row.leaseId} was released`, "lease");
    return farmError(Errors.LEASE_NOT_FOUND, "no such lease", "lease");
  }

  private requirePhysical(serial: string): string {
    const id = this.registry.physicalIdOf(serial);
    if (!id) throw farmError(Errors.DEVICE_NOT_FOUND, `no agent reports a device with serial ${serial} (or its identity is not read yet)`, "device");
    return id;
  }
}

/** Oldest first; the lease id breaks ties so the order is total (the paging key). */
function byAcquired(a: LeaseRow, b: LeaseRow): number {
  return a.acquiredAt - b.acquiredAt || (a.leaseId < b.leaseId ? -1 : a.leaseId > b.leaseId ? 1 : 0);
}
