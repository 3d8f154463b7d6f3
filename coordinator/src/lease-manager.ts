import { createHash, randomBytes, randomUUID } from "node:crypto";
import { and, eq } from "drizzle-orm";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import type { CoordinatorDb } from "./db/open-database.js";
import { deviceLabels, leases, leaseWaiters } from "./db/schema.js";
import type { Candidate, Registry } from "./registry.js";

export const DEFAULT_TTL_MS = 5 * 60_000;
export const MAX_TTL_MS = 24 * 3_600_000;
export const MAX_WAIT_MS = 24 * 3_600_000;
/** How long a waiter from before a coordinator restart keeps its place for its client to come back. */
export const RESUME_GRACE_MS = 30_000;

export interface Selector {
  serial: string;
  physicalId: string;
  labels: Record<string, string>;
  model: string;
  apiLevelMin: number;
  apiLevelMax: number;
  agent: string;
}

export type LeaseRow = typeof leases.$inferSelect;

export interface Waiter {
  ticket: string;
  seq: number;
  holder: string;
  selector: Selector;
  enqueuedAt: number;
  waitDeadline: number;
  ttlMs: number;
  /** Set while a client call is waiting on this entry. */
  deliver?: (grant: { lease: LeaseRow; token: string }) => boolean;
  /** Ends the waiting call with an error. */
  fail?: (e: Error) => void;
  /** For entries restored after a restart: dropped unless reclaimed by then. */
  orphanUntil?: number;
}

const hash = (token: string) => createHash("sha256").update(token).digest("hex");

/**
 * Leases: one active lease per physical device (all its serials), granted
 * FIFO among the waiting requests that match a freed device. A grant is
 * committed before it is handed out; a waiter whose call ended is removed
 * before it can be granted; an unrenewed lease expires and frees the device.
 * Leases, the queue and labels are in SQLite and survive a restart.
 */
/** What changed, for live watchers (dashboards). */
export type LeaseEvent =
  | { kind: "lease"; lease: LeaseRow }
  | { kind: "leaseEnded"; lease: LeaseRow }
  | { kind: "queue"; waiters: Waiter[] }
  | { kind: "labels"; physicalId: string; labels: Record<string, string> };

export class LeaseManager {
  /** Receives every change watchers should see; set by the coordinator. */
  onEvent: ((e: LeaseEvent) => void) | undefined;

  private readonly active = new Map<string, LeaseRow>();
  private readonly byToken = new Map<string, LeaseRow>();
  private readonly labels = new Map<string, Map<string, string>>();
  private waiters: Waiter[] = [];
  private seq = 0;
  private dispatching = false;
  private dispatchAgain = false;

  constructor(
    private readonly db: CoordinatorDb,
    private readonly registry: Registry,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    for (const row of db.select().from(leases).where(eq(leases.state, "active")).all()) {
      this.active.set(row.physicalId, row);
      this.byToken.set(row.tokenHash, row);
    }
    for (const row of db.select().from(deviceLabels).all()) {
      const m = this.labels.get(row.physicalId) ?? new Map<string, string>();
      m.set(row.key, row.value);
      this.labels.set(row.physicalId, m);
    }
    const restored = db.select().from(leaseWaiters).all().sort((a, b) => a.seq - b.seq);
    for (const w of restored) {
      this.waiters.push({
        ticket: w.ticket,
        seq: w.seq,
        holder: w.holder,
        selector: JSON.parse(w.selector) as Selector,
        enqueuedAt: w.enqueuedAt,
        waitDeadline: w.waitDeadline,
        ttlMs: w.ttlMs,
        orphanUntil: Math.min(w.waitDeadline, this.now() + RESUME_GRACE_MS),
      });
      this.seq = Math.max(this.seq, w.seq);
    }
    registry.onChange = () => this.dispatch();
  }

  /**
   * Waits for a matching device. Resolves with a committed grant, or rejects
   * when the wait deadline passes or `signal` aborts (the client went away).
   */
  acquire(holder: string, selector: Selector, opts: { waitMs: number; ttlMs: number; ticket: string; signal: AbortSignal }): Promise<{ lease: LeaseRow; token: string }> {
    validateSelector(selector);
    if (opts.ttlMs < 1_000 || opts.ttlMs > MAX_TTL_MS) throw invalidArgument("ttl", `ttl must be within 1s..24h, got ${opts.ttlMs} ms`);
    if (opts.waitMs < 0 || opts.waitMs > MAX_WAIT_MS) throw invalidArgument("wait", "wait must be within 0..24h");
    if (selector.serial && !this.registry.physicalIdOf(selector.serial)) {
      throw farmError(Errors.DEVICE_NOT_FOUND, `no agent reports a device with serial ${selector.serial}`, "device");
    }
    const ticket = opts.ticket || randomUUID();
    return new Promise((resolve, reject) => {
      let waiter = this.waiters.find((w) => w.ticket === ticket);
      if (waiter && waiter.holder !== holder) return reject(farmError(Errors.PERMISSION_DENIED, "that ticket belongs to another caller", "ticket"));
      if (!waiter) {
        waiter = { ticket, seq: ++this.seq, holder, selector, enqueuedAt: this.now(), waitDeadline: this.now() + opts.waitMs, ttlMs: opts.ttlMs };
        // Nobody is waiting ahead: grant at once without queueing.
        if (this.waiters.length === 0 && !opts.signal.aborted) {
          const route = this.pick(this.registry.candidates(), selector);
          if (route) return resolve(this.grant(waiter, route));
        }
        this.waiters.push(waiter);
        this.db.insert(leaseWaiters).values({ ...waiter, selector: JSON.stringify(selector) }).run();
        this.queueChanged();
      }
      const w = waiter;
      delete w.orphanUntil;
      const timer = setTimeout(() => this.sweep(), Math.max(0, w.waitDeadline - this.now()) + 5);
      const onAbort = () => {
        // The client is gone: it must never be granted.
        this.removeWaiter(w);
        cleanup();
        reject(farmError(Errors.LEASE_WAIT_CANCELLED, "the caller stopped waiting"));
      };
      let settled = false;
      const cleanup = () => {
        settled = true;
        clearTimeout(timer);
        opts.signal.removeEventListener("abort", onAbort);
        delete w.deliver;
        delete w.fail;
      };
      w.deliver = (grant) => {
        if (opts.signal.aborted) return false;
        cleanup();
        resolve(grant);
        return true;
      };
      w.fail = (e) => {
        cleanup();
        reject(e);
      };
      if (opts.signal.aborted) return onAbort();
      opts.signal.addEventListener("abort", onAbort, { once: true });
      this.dispatch();
      // Not granted at once and not willing to wait: fail now.
      if (!settled && opts.waitMs === 0) {
        this.removeWaiter(w);
        cleanup();
        reject(farmError(Errors.NO_DEVICE_AVAILABLE, `no free device matches ${describe(selector)}`));
      }
    });
  }

  renew(token: string, ttlMs: number): LeaseRow {
    const lease = this.byToken.get(hash(token));
    if (!lease) throw this.unknownToken(token);
    const ttl = ttlMs || lease.ttlMs;
    if (ttl < 1_000 || ttl > MAX_TTL_MS) throw invalidArgument("ttl", "ttl must be within 1s..24h");
    lease.expiresAt = this.now() + ttl;
    lease.ttlMs = ttl;
    this.db.update(leases).set({ expiresAt: lease.expiresAt, ttlMs: ttl }).where(eq(leases.leaseId, lease.leaseId)).run();
    this.onEvent?.({ kind: "lease", lease });
    return lease;
  }

  release(token: string): LeaseRow {
    const lease = this.byToken.get(hash(token));
    if (!lease) throw this.unknownToken(token);
    this.end(lease, "released");
    this.dispatch();
    return lease;
  }

  list(): { leases: LeaseRow[]; queue: Waiter[] } {
    return { leases: [...this.active.values()].sort((a, b) => a.acquiredAt - b.acquiredAt), queue: [...this.waiters] };
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

  private holds(lease: LeaseRow, tokenName: string, leaseToken: string | null): boolean {
    return lease.holder === tokenName || (leaseToken !== null && leaseToken !== "" && hash(leaseToken) === lease.tokenHash);
  }

  leaseOf(physicalId: string): LeaseRow | undefined {
    return this.active.get(physicalId);
  }

  labelsOf(physicalId: string): Record<string, string> {
    return Object.fromEntries(this.labels.get(physicalId) ?? []);
  }

  setLabels(serial: string, labels: Record<string, string>, caller?: { tokenName: string; admin: boolean; leaseToken: string | null }): { physicalId: string; labels: Record<string, string> } {
    const physicalId = this.requirePhysical(serial);
    if (caller) this.requireHolder(physicalId, caller, caller.leaseToken, "change its labels");
    for (const [k, v] of Object.entries(labels)) {
      validateLabelPair(k, v);
      this.db.insert(deviceLabels).values({ physicalId, key: k, value: v }).onConflictDoUpdate({ target: [deviceLabels.physicalId, deviceLabels.key], set: { value: v } }).run();
      const m = this.labels.get(physicalId) ?? new Map<string, string>();
      m.set(k, v);
      this.labels.set(physicalId, m);
    }
    this.dispatch();
    this.onEvent?.({ kind: "labels", physicalId, labels: this.labelsOf(physicalId) });
    return { physicalId, labels: this.labelsOf(physicalId) };
  }

  removeLabel(serial: string, key: string, caller?: { tokenName: string; admin: boolean; leaseToken: string | null }): { physicalId: string; labels: Record<string, string> } {
    const physicalId = this.requirePhysical(serial);
    if (caller) this.requireHolder(physicalId, caller, caller.leaseToken, "change its labels");
    this.db.delete(deviceLabels).where(and(eq(deviceLabels.physicalId, physicalId), eq(deviceLabels.key, key))).run();
    this.labels.get(physicalId)?.delete(key);
    this.onEvent?.({ kind: "labels", physicalId, labels: this.labelsOf(physicalId) });
    return { physicalId, labels: this.labelsOf(physicalId) };
  }

  /** Expires leases, drops waiters past their deadline, then grants. */
  sweep(): void {
    const now = this.now();
    const expired = [...this.active.values()].filter((l) => l.expiresAt <= now);
    for (const l of expired) {
      this.end(l, "expired");
      this.log.info("lease expired", { leaseId: l.leaseId, holder: l.holder, physicalId: l.physicalId });
    }
    for (const w of [...this.waiters]) {
      const orphanGone = w.orphanUntil !== undefined && w.orphanUntil <= now;
      if (w.waitDeadline <= now || orphanGone) {
        this.removeWaiter(w);
        w.fail?.(farmError(Errors.LEASE_WAIT_TIMEOUT, `no matching device came free before the wait ended (${describe(w.selector)})`));
      }
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
        if (this.waiters.length === 0) return;
        const candidates = this.registry.candidates();
        for (const w of [...this.waiters]) {
          if (!w.deliver) continue; // orphaned until its client comes back
          const route = this.pick(candidates, w.selector);
          if (!route) continue;
          const { lease, token } = this.grant(w, route);
          if (!w.deliver({ lease, token })) {
            // Committed, but nobody is there to receive it: back to the pool.
            this.end(lease, "released");
            this.dispatchAgain = true;
          }
        }
      } while (this.dispatchAgain);
    } finally {
      this.dispatching = false;
    }
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
      const entries = Object.entries(s.labels);
      if (entries.length > 0) {
        const labels = this.labels.get(r.physicalId);
        if (entries.some(([k, v]) => labels?.get(k) !== v)) continue;
      }
      return r;
    }
    return undefined;
  }

  private grant(w: Waiter, route: Candidate): { lease: LeaseRow; token: string } {
    const token = `farml_${randomBytes(24).toString("base64url")}`;
    const now = this.now();
    const lease: LeaseRow = {
      leaseId: randomUUID(),
      tokenHash: hash(token),
      holder: w.holder,
      physicalId: route.physicalId,
      agentId: route.agentId,
      serial: route.serial,
      acquiredAt: now,
      expiresAt: now + w.ttlMs,
      ttlMs: w.ttlMs,
      state: "active",
      endedAt: null,
    };
    // Committed (with the waiter's removal) before anyone is told.
    const queued = this.waiters.includes(w);
    if (queued) {
      this.db.transaction((tx) => {
        tx.insert(leases).values(lease).run();
        tx.delete(leaseWaiters).where(eq(leaseWaiters.ticket, w.ticket)).run();
      });
    } else {
      this.db.insert(leases).values(lease).run();
    }
    this.waiters = this.waiters.filter((x) => x !== w);
    this.active.set(lease.physicalId, lease);
    this.byToken.set(lease.tokenHash, lease);
    this.onEvent?.({ kind: "lease", lease });
    if (queued) this.queueChanged();
    return { lease, token };
  }

  private end(lease: LeaseRow, state: "released" | "expired"): void {
    if (this.active.get(lease.physicalId) !== lease) return;
    this.active.delete(lease.physicalId);
    this.byToken.delete(lease.tokenHash);
    lease.state = state;
    lease.endedAt = this.now();
    this.db.update(leases).set({ state, endedAt: lease.endedAt }).where(eq(leases.leaseId, lease.leaseId)).run();
    this.onEvent?.({ kind: "leaseEnded", lease });
  }

  private removeWaiter(w: Waiter): void {
    if (!this.waiters.includes(w)) return;
    this.waiters = this.waiters.filter((x) => x !== w);
    this.db.delete(leaseWaiters).where(eq(leaseWaiters.ticket, w.ticket)).run();
    this.queueChanged();
  }

  private queueChanged(): void {
    this.onEvent?.({ kind: "queue", waiters: [...this.waiters] });
  }

  /** Labels of every labelled physical device. */
  allLabels(): { physicalId: string; labels: Record<string, string> }[] {
    return [...this.labels.entries()].filter(([, m]) => m.size > 0).map(([physicalId, m]) => ({ physicalId, labels: Object.fromEntries(m) }));
  }

  private unknownToken(token: string): Error {
    const row = this.db.select().from(leases).where(eq(leases.tokenHash, hash(token))).get();
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

const labelKey = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$/;

function validateLabelPair(k: string, v: string): void {
  if (!labelKey.test(k)) throw invalidArgument("label", `label key "${k}" must be 1-63 of A-Z a-z 0-9 . _ / - starting with a letter or digit`);
  if (v.length > 255 || /[\n\0]/.test(v)) throw invalidArgument("label", `label value for "${k}" must be one line of at most 255 characters`);
}

function validateSelector(s: Selector): void {
  for (const [k, v] of Object.entries(s.labels)) validateLabelPair(k, v);
  if (s.apiLevelMin && s.apiLevelMax && s.apiLevelMin > s.apiLevelMax) throw invalidArgument("api-level", "api level range is empty");
}

export function describe(s: Selector): string {
  const parts = [
    s.serial && `device ${s.serial}`,
    s.physicalId && `physical id ${s.physicalId}`,
    ...Object.entries(s.labels).map(([k, v]) => `${k}=${v}`),
    s.model && `model ${s.model}`,
    (s.apiLevelMin || s.apiLevelMax) && `api ${s.apiLevelMin || ""}..${s.apiLevelMax || ""}`,
    s.agent && `agent ${s.agent}`,
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(", ") : "any device";
}
