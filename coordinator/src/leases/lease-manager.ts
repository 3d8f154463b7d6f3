import { EventEmitter } from "node:events";
import { createHash, randomBytes, randomInt, randomUUID } from "node:crypto";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import type { DeviceLabels } from "../devices/device-labels.js";
import { readPage, type Page, type PageRequest } from "../paging.js";
import type { Candidate, Registry } from "../registry/registry.js";
import type { LeasePhone, LeaseRow, LeaseStore, Waiter } from "./lease-store.js";
import { describeSelector, validateSelector, type Selector } from "./selector.js";
import { resolveSelector } from "./selector-match.js";
import { WaitQueue, type Grant, type PendingCall } from "./wait-queue.js";

export { RESUME_GRACE_MS, type Grant } from "./wait-queue.js";

/** How every physical id begins (agent/src/devices/physical-identity.ts). */
const PHYSICAL_ID_PREFIX = "pd-";

export const DEFAULT_TTL_MS = 5 * 60_000;
export const MAX_TTL_MS = 24 * 3_600_000;
export const MAX_WAIT_MS = 24 * 3_600_000;

/** What changed, for live watchers (dashboards). */
export interface LeaseEvents {
  /** A lease was granted or renewed. */
  lease: [lease: LeaseRow];
  /**
   * A lease was released or expired (its state says which); `origin`: ended by this coordinator, or by
   * another replica (which does the database's follow-up, such as ending the lease's sessions);
   * `sessions` "none": the statement that ended it saw no running session on it (replicas' release).
   */
  leaseEnded: [lease: LeaseRow, origin: "here" | "elsewhere", sessions?: "none"];
  /** The wait queue changed: every waiter, oldest first. */
  queue: [waiters: Waiter[]];
  /**
   * Every lease end this replica learns, once committed: its own, and another replica's by notice even
   * when this replica had not heard of the lease yet (an end's notice may overtake its grant's, which
   * `leaseEnded` then leaves out). It may come more than once for one lease.
   */
  endLearned: [lease: LeaseRow];
}

/** How a lease manager shares leases with the other coordinator replicas (PostgreSQL). */
export interface SharedLeases {
  replicaId: string;
  isLive(replicaId: string): boolean;
  /**
   * Tells the others: "lease" (a lease changed; `row` is it as committed, so they apply it without
   * re-reading), "queue" (the queue changed; the id is "*": they re-read the queue).
   */
  publish(kind: "lease" | "queue", id: string, row?: LeaseRow): Promise<void>;
}

/** Who renews or releases a lease, for the holder rule. */
export interface LeaseCaller {
  tokenName: string;
  admin: boolean;
}

/** Who changes a label, for the holder rule. */
export interface LabelCaller {
  tokenName: string;
  admin: boolean;
  leaseToken: string | null;
}

/** How many ended lease ids a replica remembers, to ignore a notice of one that arrives after its end. */
const ENDED_MEMORY = 10_000;

const hash = (token: string) => createHash("sha256").update(token).digest("hex");
const newLeaseToken = () => `farml_${randomBytes(24).toString("base64url")}`;

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
  /** Every change to leases and the queue runs in turn through here: a decision and its write are never interleaved with another's. */
  private turn: Promise<unknown> = Promise.resolve();
  private dispatchRun: Promise<void> | undefined;
  private dispatchAgain = false;
  /** The store of the current turn (on PostgreSQL, its transaction). */
  private store: LeaseStore;
  private shared: SharedLeases | undefined;
  /** What the current turn does once its changes are committed: events, hand-overs, notices. */
  private after: (() => void)[] = [];
  /** Grants committed for callers that had gone when they were handed over: released in the next turn. */
  private undelivered: LeaseRow[] = [];
  /**
   * Replicas: leases known to have ended (lease ids are never reused), newest last. Notices are sent
   * after commit by each replica, so one lease's grant notice may arrive after its release notice.
   */
  private readonly endedIds = new Set<string>();
  private readonly grantHooks: ((lease: LeaseRow) => Promise<void>)[] = [];
  private readonly endingHooks: ((lease: LeaseRow) => void)[] = [];

  private constructor(
    private readonly base: LeaseStore,
    private readonly registry: Registry,
    private readonly labels: DeviceLabels,
    private readonly log: Logger,
    private readonly now: () => number,
    private readonly queue: WaitQueue,
    activeRows: readonly LeaseRow[],
  ) {
    this.store = base;
    for (const row of activeRows) {
      this.active.set(row.physicalId, row);
      this.byToken.set(row.tokenHash, row);
    }
  }

  /** Reads the active leases and the stored queue once; from then on they are served from memory and written through. */
  static async open(store: LeaseStore, registry: Registry, labels: DeviceLabels, log: Logger, now: () => number = Date.now): Promise<LeaseManager> {
    const [rows, queue] = await Promise.all([store.activeLeases(), WaitQueue.open(store, now())]);
    return new LeaseManager(store, registry, labels, log, now, queue, rows);
  }

  /**
   * Shares leases with the other replicas of a PostgreSQL database: from
   * now on every change runs under the farm-wide lease lock, on what is
   * stored (read at the start of each turn), so grants across replicas are
   * FIFO and never double. A waiter whose caller is on another replica keeps
   * its device: that replica is told to grant it.
   */
  share(shared: SharedLeases): void {
    this.shared = shared;
  }

  /** Re-reads leases and the queue (another replica changed them), then grants what this replica's callers wait for. */
  async refresh(): Promise<void> {
    // A read for the cache, in turn with this replica's changes but without the farm-wide lock:
    // every change re-reads under the lock anyway.
    await this.inTurn(async () => undefined, "read");
    if (this.queue.hasCalls()) await this.dispatch();
  }

  /**
   * Waits for a matching device. Resolves with a committed grant, or rejects
   * when the wait deadline passes or `signal` aborts (the client went away).
   */
  async acquire(holder: string, selector: Selector, opts: { waitMs: number; ttlMs: number; ticket: string; signal: AbortSignal }): Promise<Grant> {
    validateSelector(selector);
    if (opts.ttlMs < 1_000 || opts.ttlMs > MAX_TTL_MS) throw invalidArgument("ttl", `ttl must be within 1s..24h, got ${opts.ttlMs} ms`);
    if (opts.waitMs < 0 || opts.waitMs > MAX_WAIT_MS) throw invalidArgument("wait", "wait must be within 0..24h");
    let identityPending = false;
    if (selector.serial && !this.registry.physicalIdOf(selector.serial)) {
      // A physical id (or its prefix, as `farm devices` shows it) pasted where a serial goes: taken as one.
      if (selector.serial.startsWith(PHYSICAL_ID_PREFIX)) selector = { ...selector, serial: "", physicalId: selector.serial };
      // A phone whose identity is still being read is there: a caller who waits, waits for it (as for a busy one).
      else if (opts.waitMs > 0 && this.registry.identityPendingOn(selector.serial) !== undefined) identityPending = true;
      else throw this.registry.unresolvedSerial(selector.serial, "device");
    }
    // Refused at once when no phone can ever match, rather than waited on; a short physical id becomes the full one.
    if (!identityPending) {
      selector = resolveSelector(selector, this.registry.knownPhones(), (id) => this.labels.of(id), (id) => {
        const hold = this.registry.holdOf(id);
        return hold?.state === "needs-attention" ? hold.reason : undefined;
      });
    }
    const ticket = opts.ticket || randomUUID();
    // Made here, where the caller waits; only its hash is stored (on the place, then on the lease).
    const token = newLeaseToken();
    const granted = new Promise<Grant>((resolve, reject) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      let w: Waiter | undefined;
      const end = () => {
        settled = true;
        clearTimeout(timer);
        opts.signal.removeEventListener("abort", onAbort);
        if (w) this.queue.detach(w.ticket, call);
      };
      const call: PendingCall = {
        token,
        gone: () => opts.signal.aborted || settled,
        deliver: (grant) => {
          if (opts.signal.aborted || settled) return false;
          end();
          resolve(grant);
          return true;
        },
        fail: (e) => {
          if (settled) return;
          end();
          reject(e);
        },
      };
      const giveUp = (err: Error) => {
        if (settled) return;
        end();
        reject(err);
        // The caller is gone or done waiting: its place goes (after any grant in progress, which checks `gone`).
        const place = w;
        if (place) this.kick(this.inTurn(() => this.removeWaiter(place)));
      };
      const onAbort = () => giveUp(farmError(Errors.LEASE_WAIT_CANCELLED, "the caller stopped waiting"));
      // Replicas: with nobody queued, the grant at once needs no lock (one conditional insert).
      // Not in turn: the database decides it alone, so grants at once run side by side (and commit together).
      const atOnce = this.shared ? this.grantIfFree(holder, selector, opts.ttlMs, ticket, token, opts.signal) : Promise.resolve(undefined);
      atOnce.then((early) =>
        early ?? this.inTurn(async (): Promise<Grant | undefined> => {
          const found = this.queue.find(ticket);
          if (found && found.holder !== holder) throw farmError(Errors.PERMISSION_DENIED, "that ticket belongs to another caller", "ticket");
          if (found) {
            // The caller came back (perhaps through another replica): it waits here now, for this token.
            await this.queue.moveTo(found, this.shared?.replicaId ?? null, hash(token));
            w = found;
          } else {
            // Nobody is waiting ahead: grant at once without queueing.
            if (this.queue.size === 0 && !opts.signal.aborted) {
              const route = this.pick(this.registry.candidates(), selector);
              if (route) return { lease: await this.grant(holder, opts.ttlMs, route, hash(token)), token };
            }
            const now = this.now();
            w = await this.queue.enqueue({
              ticket,
              holder,
              selector,
              enqueuedAt: now,
              waitDeadline: now + opts.waitMs,
              ttlMs: opts.ttlMs,
              replicaId: this.shared?.replicaId ?? null,
              tokenHash: hash(token),
            });
            this.queueChanged();
          }
          // The same ticket again (a client that reconnected): the newer call takes the place over, and the
          // older one ends now (its abort can no longer drop the place).
          this.queue.attach(ticket, call)?.fail(farmError(Errors.LEASE_WAIT_CANCELLED, "a newer call with the same ticket took this one's place"));
          return undefined;
        })
      ).then(
        (granted) => {
          if (granted) {
            settled = true;
            return resolve(granted);
          }
          const place = w as Waiter;
          timer = setTimeout(() => this.kick(this.sweep()), Math.max(0, place.waitDeadline - this.now()) + 5);
          if (opts.signal.aborted) return onAbort();
          opts.signal.addEventListener("abort", onAbort, { once: true });
          this.dispatch().then(
            () => {
              // Not granted at once and not willing to wait: fail now.
              if (opts.waitMs === 0) giveUp(farmError(Errors.NO_DEVICE_AVAILABLE, `no free device matches ${describeSelector(selector)}`));
            },
            (err: unknown) => {
              // A grant that could not be stored: a caller willing to wait keeps its place for the next try.
              if (opts.waitMs === 0) giveUp(err instanceof Error ? err : new Error(String(err)));
              else this.log.error("lease grant failed; the waiter keeps its place", { ticket, error: (err as Error).message });
            },
          );
        },
        (err: unknown) => {
          settled = true;
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      );
    });
    const hooks = this.grantHooks;
    // What must be read of the phone before its holder can change it (the cleanup's baseline): done before the token is handed out.
    return hooks.length === 0 ? granted : granted.then(async (g) => {
      for (const h of hooks) await h(g.lease);
      return g;
    });
  }

  /** Runs `fn` on every lease granted through acquire, before its caller gets the token. */
  onGranted(fn: (lease: LeaseRow) => Promise<void>): void {
    this.grantHooks.push(fn);
  }

  /**
   * Runs `fn` synchronously as this replica learns a lease ended (released,
   * expired, revoked; here, or through another replica), before it decides
   * its next grant: a phone that must be cleaned is held out of the pool
   * before anyone else can get it here. It may run more than once for one
   * lease (its own end, then another replica's notice of it).
   */
  onEnding(fn: (lease: LeaseRow) => void): void {
    this.endingHooks.push(fn);
  }

  private ending(lease: LeaseRow): void {
    this.later(() => this.events.emit("endLearned", lease));
    for (const f of this.endingHooks) {
      try {
        f(lease);
      } catch (err) {
        this.log.error("a lease-end hook failed", { leaseId: lease.leaseId, error: (err as Error).message });
      }
    }
  }

  /** Extends a lease; with `caller` (every API call), only for its holder or an admin: the lease token alone is not enough. */
  renew(token: string, ttlMs: number, caller?: LeaseCaller): Promise<LeaseRow> {
    if (this.shared) return this.renewStored(token, ttlMs, caller);
    return this.inTurn(async () => {
      const lease = this.byToken.get(hash(token));
      if (!lease) throw await this.unknownToken(token);
      if (caller) requireLeaseHolder(lease, caller, "renew");
      const ttl = ttlMs || lease.ttlMs;
      if (ttl < 1_000 || ttl > MAX_TTL_MS) throw invalidArgument("ttl", "ttl must be within 1s..24h");
      const expiresAt = this.now() + ttl;
      await this.store.renewLease(lease.leaseId, expiresAt, ttl);
      lease.expiresAt = expiresAt;
      lease.ttlMs = ttl;
      this.later(() => this.events.emit("lease", lease));
      this.tell("lease", lease.leaseId, lease);
      return lease;
    });
  }

  /** Replicas: the database decides a renewal in one statement (holder rule included), outside the turn. */
  private async renewStored(token: string, ttlMs: number, caller?: LeaseCaller): Promise<LeaseRow> {
    if (ttlMs !== 0 && (ttlMs < 1_000 || ttlMs > MAX_TTL_MS)) throw invalidArgument("ttl", "ttl must be within 1s..24h");
    const row = await this.base.renewByTokenHash(hash(token), ttlMs, this.now(), caller);
    if (!row) {
      const stored = await this.base.leaseByTokenHash(hash(token));
      if (stored?.state === "active" && caller) requireLeaseHolder(stored, caller, "renew");
      throw await this.unknownToken(token, this.base);
    }
    return this.committed(() => {
      this.learned(row);
      this.tell("lease", row.leaseId, row);
      return this.active.get(row.physicalId) ?? row;
    });
  }

  /** Ends a lease; with `caller` (every API call), only for its holder or an admin, as renewing. */
  async release(token: string, caller?: LeaseCaller): Promise<LeaseRow> {
    // Replicas: the database decides, in one statement (holder rule included), whatever this replica has
    // heard; memory follows what it ended. No lock: ending decides nothing for anyone else.
    // Not in turn either: releases run side by side.
    const lease = this.shared ?
      await (async () => {
        const ended = await this.base.releaseByTokenHash(hash(token), this.now(), caller);
        if (!ended) {
          const row = await this.base.leaseByTokenHash(hash(token));
          if (row?.state === "active" && caller) requireLeaseHolder(row, caller, "release");
          throw await this.unknownToken(token, this.base);
        }
        const { runningSessions, ...row } = ended;
        return this.committed(() => {
          this.ended(row, "here", runningSessions === false ? "none" : undefined);
          this.tell("lease", row.leaseId, row);
          return row;
        });
      })() :
      await this.inTurn(async () => {
        const lease = this.byToken.get(hash(token));
        if (lease && caller) requireLeaseHolder(lease, caller, "release");
        if (!lease || !(await this.end(lease, "released"))) throw await this.unknownToken(token);
        return lease;
      });
    this.kick(this.dispatch());
    return lease;
  }

  /**
   * Ends everything `holder` has (its token was revoked): each active lease
   * ends as a release would (the phone goes to the next waiter, and what
   * hangs off the lease ends with it), and each of its places in the queue
   * is dropped, failing the call that waits on it. On replicas this runs
   * under the lock on what is stored, so leases and places taken through
   * the other replicas end too (they are told, as of any change).
   */
  async revokeHolder(holder: string): Promise<{ leases: LeaseRow[]; waiters: Waiter[] }> {
    const revoked = await this.inTurn(async () => {
      const leases: LeaseRow[] = [];
      for (const lease of [...this.active.values()]) {
        if (lease.holder === holder && (await this.end(lease, "released"))) leases.push(lease);
      }
      const waiters: Waiter[] = [];
      for (const w of this.queue.list()) {
        if (w.holder !== holder) continue;
        const call = this.queue.callOf(w.ticket);
        if (!(await this.queue.remove(w))) continue;
        waiters.push(w);
        if (call) {
          this.queue.detach(w.ticket, call);
          this.later(() => call.fail(farmError(Errors.LEASE_WAIT_CANCELLED, `the token "${holder}" was revoked: its place in the queue is dropped`)));
        }
      }
      if (waiters.length > 0) this.queueChanged();
      return { leases, waiters };
    });
    this.kick(this.dispatch());
    return revoked;
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
        .slice(0, limit));
    return { leases, queue: page.pageToken === "" ? this.queue.list() : [] };
  }

  /**
   * May this caller change this phone? Mutations need the caller's lease on
   * the physical device, whichever of its serials they name.
   */
  authorize(physicalId: string, leaseToken: string | null): LeaseRow {
    return checkLease(physicalId, this.active.get(physicalId), leaseToken);
  }

  /**
   * As `authorize`, but on replicas decided by the database (one indexed
   * read of the phone's active lease): a lease released or expired through
   * another replica is refused here at once, without waiting for its notice.
   * On SQLite this process is the only writer and memory is the store.
   */
  async authorizeStored(physicalId: string, leaseToken: string | null): Promise<LeaseRow> {
    if (!this.shared) return this.authorize(physicalId, leaseToken);
    return checkLease(physicalId, await this.base.activeLeaseOf(physicalId), leaseToken);
  }

  /**
   * The phone's active lease as the database has it now on replicas (one
   * indexed read), as memory has it on SQLite: what a replica holding an
   * agent checks before it carries that phone's stream to another replica.
   */
  async storedLeaseOf(physicalId: string): Promise<LeaseRow | undefined> {
    return this.shared ? await this.base.activeLeaseOf(physicalId) : this.active.get(physicalId);
  }

  /**
   * Applies another replica's lease change as its notice carries it (the
   * row as committed), without reading the database; a notice that
   * contradicts what is known here (another lease on the phone) re-reads
   * that phone's lease, one indexed read. Then grants what callers here
   * wait for, when a phone came free.
   */
  async applyNotice(row: LeaseRow): Promise<void> {
    const freed = await this.inTurn(async () => {
      if (row.state !== "active") {
        this.ended(row);
        return true;
      }
      if (this.endedIds.has(row.leaseId)) return false;
      const cur = this.active.get(row.physicalId);
      if (cur && cur.leaseId !== row.leaseId) {
        const stored = await this.store.activeLeaseOf(row.physicalId);
        if (stored?.leaseId === cur.leaseId) return false;
        this.ended({ ...cur, state: "released", endedAt: this.now() });
        if (stored) this.learned(stored);
        return true;
      }
      this.learned(row);
      return false;
    }, "plain");
    if (freed && this.queue.hasCalls()) await this.dispatch();
  }

  /**
   * A leased phone is its holder's: what hangs off the lease (labels,
   * recordings, app forwards) changes only by the holder (its token name, or
   * its lease token presented) or an admin. An unleased phone is anyone's.
   *
   * For a read of the phone, memory allows, and on replicas a refusal is
   * confirmed by the database first (one indexed read, paid only when memory
   * refuses), so a lease granted through another replica is its holder's
   * here before its notice arrives. Memory can still allow a former holder a
   * read for the milliseconds a release notice takes; every change of the
   * phone is decided by the database.
   */
  async requireHolderToRead(physicalId: string, caller: { tokenName: string; admin: boolean }, leaseToken: string | null, what: string): Promise<void> {
    const lease = this.active.get(physicalId);
    if (!lease || caller.admin || this.holds(lease, caller.tokenName, leaseToken)) return;
    this.refuseUnlessHolder(physicalId, this.shared ? await this.base.activeLeaseOf(physicalId) : lease, caller, leaseToken, what);
  }

  /**
   * For a change of what hangs off the lease (labels, recordings): on
   * replicas decided by the database (one indexed read), so a lease released
   * or granted through another replica counts here in the next call.
   */
  async requireHolderToChange(physicalId: string, caller: { tokenName: string; admin: boolean }, leaseToken: string | null, what: string): Promise<void> {
    if (caller.admin) return;
    this.refuseUnlessHolder(physicalId, this.shared ? await this.base.activeLeaseOf(physicalId) : this.active.get(physicalId), caller, leaseToken, what);
  }

  private refuseUnlessHolder(physicalId: string, lease: LeaseRow | undefined, caller: { tokenName: string; admin: boolean }, leaseToken: string | null, what: string): void {
    if (!lease || caller.admin || this.holds(lease, caller.tokenName, leaseToken)) return;
    throw farmError(
      Errors.LEASE_HELD_BY_OTHER,
      `device ${physicalId} is leased by ${lease.holder} until ${new Date(lease.expiresAt).toISOString()}; only the holder or an admin may ${what}`,
      "lease",
      { dispatched: false, ambiguous: false },
    );
  }

  /** Whether this caller holds the phone's active lease: decided by the database on replicas (one indexed read). */
  async isHolderStored(physicalId: string, tokenName: string, leaseToken: string | null): Promise<boolean> {
    const lease = this.shared ? await this.base.activeLeaseOf(physicalId) : this.active.get(physicalId);
    return lease !== undefined && this.holds(lease, tokenName, leaseToken);
  }

  leaseOf(physicalId: string): LeaseRow | undefined {
    return this.active.get(physicalId);
  }

  /** The active lease a lease token stands for, or undefined (a lease this replica has not heard of yet included). */
  leaseOfToken(leaseToken: string): LeaseRow | undefined {
    const lease = this.byToken.get(hash(leaseToken));
    return lease?.state === "active" ? lease : undefined;
  }

  /** Sets labels on the phone behind a serial; while it is leased, only its holder or an admin may (without `caller`: no check). */
  async setLabels(serial: string, labels: Record<string, string>, caller?: LabelCaller): Promise<{ physicalId: string; labels: Record<string, string> }> {
    const physicalId = this.requirePhysical(serial);
    if (caller) await this.requireHolderToChange(physicalId, caller, caller.leaseToken, "change its labels");
    return { physicalId, labels: await this.labels.set(physicalId, labels) };
  }

  async removeLabel(serial: string, key: string, caller?: LabelCaller): Promise<{ physicalId: string; labels: Record<string, string> }> {
    const physicalId = this.requirePhysical(serial);
    if (caller) await this.requireHolderToChange(physicalId, caller, caller.leaseToken, "change its labels");
    return { physicalId, labels: await this.labels.remove(physicalId, key) };
  }

  /** One page of labelled physical devices, by physical id. */
  labelsPage(page: PageRequest): Page<{ physicalId: string; labels: Record<string, string> }> {
    return this.labels.listPage(page);
  }

  /** Expires leases, drops waiters past their deadline, then grants. */
  async sweep(): Promise<void> {
    // Nothing due by what this replica knows (kept current by change notices): no turn taken.
    const due = this.now();
    if (![...this.active.values()].some((l) => l.expiresAt <= due) && !this.queue.due(due).some((w) => !this.heldElsewhere(w))) return this.dispatch();
    if (this.shared) {
      // Replicas: the database expires what is due by what it stores (a renewal through another replica
      // included) in one statement, no lock; only waiters past their deadline need the turn below.
      const expired = await this.base.expireDue(this.now());
      this.committed(() => {
        for (const row of expired) {
          this.ended(row, "here");
          this.tell("lease", row.leaseId, row);
          this.log.info("lease expired", { leaseId: row.leaseId, holder: row.holder, physicalId: row.physicalId });
        }
      });
      if (expired.length > 0 && this.queue.hasCalls()) this.kick(this.dispatch());
      if (!this.queue.due(this.now()).some((w) => !this.heldElsewhere(w))) return this.dispatch();
    }
    await this.inTurn(async () => {
      const now = this.now();
      const expired = [...this.active.values()].filter((l) => l.expiresAt <= now);
      for (const l of expired) {
        await this.end(l, "expired");
        this.log.info("lease expired", { leaseId: l.leaseId, holder: l.holder, physicalId: l.physicalId });
      }
      for (const w of this.queue.due(now)) {
        // Another live replica's caller: that replica ends its wait.
        if (this.heldElsewhere(w)) continue;
        const call = this.queue.callOf(w.ticket);
        await this.removeWaiter(w);
        call?.fail(farmError(Errors.LEASE_WAIT_TIMEOUT, `no matching device came free before the wait ended (${describeSelector(w.selector)})`));
      }
    });
    await this.dispatch();
  }

  /**
   * Grants free matching devices to waiters, oldest first. Resolves when no
   * grant is left to make, including for changes that arrived meanwhile.
   */
  dispatch(): Promise<void> {
    // Nobody waits and nothing is to be given back: no turn (a waiter another replica adds is dispatched there).
    if (this.queue.size === 0 && this.undelivered.length === 0 && !this.dispatchRun) return Promise.resolve();
    if (this.dispatchRun) {
      this.dispatchAgain = true;
      return this.dispatchRun;
    }
    const run = async () => {
      try {
        do {
          this.dispatchAgain = false;
          await this.inTurn(() => this.dispatchOnce());
        } while (this.dispatchAgain);
      } finally {
        this.dispatchRun = undefined;
      }
    };
    this.dispatchRun = run();
    return this.dispatchRun;
  }

  /** Runs `work` (a sweep, a dispatch, a dropped place) for an event that has no caller to answer: a failure is logged. */
  kick(work: Promise<unknown>): void {
    work.catch((err: unknown) => this.log.error("lease bookkeeping failed; the next change or sweep retries it", { error: (err as Error).message }));
  }

  private async dispatchOnce(): Promise<void> {
    for (const lease of this.undelivered.splice(0)) await this.end(lease, "released");
    if (this.queue.size === 0) return;
    const candidates = this.registry.candidates();
    for (const w of this.queue.list()) {
      const call = this.queue.callOf(w.ticket);
      const here = call !== undefined && !call.gone();
      // Waiting on another live replica: granted here all the same (under the same lock, in the same
      // order); that replica hands the lease over, since only it knows the token whose hash is stored.
      const elsewhere = !here && this.heldElsewhere(w) && w.tokenHash !== null;
      // Nobody waits on it (restored, until its client comes back) or its caller is leaving: skipped.
      if (!here && !elsewhere) continue;
      const route = this.pick(candidates, w.selector);
      if (!route) continue;
      const lease = await this.grant(w.holder, w.ttlMs, route, w.tokenHash ?? hash((call as PendingCall).token), w);
      if (here) this.handOver(call, lease);
    }
  }

  /** Gives a granted lease to its caller once committed; one whose caller has gone goes back in the next turn. */
  private handOver(call: PendingCall, lease: LeaseRow): void {
    this.later(() => {
      if (call.deliver({ lease, token: call.token })) return;
      this.undelivered.push(lease);
      this.dispatchAgain = true;
    });
  }

  /**
   * Ends every waiting call with `err` and keeps the stored queue, as a
   * process that stops does: the next one resumes the queue.
   */
  abandonCalls(err: Error): void {
    this.queue.abandon(err);
  }

  /**
   * Runs `fn` after every change queued before it (the next one waits for
   * it, whatever its outcome). "exclusive": the store's exclusive turn (on
   * PostgreSQL, under the farm-wide lease lock, on what is stored now);
   * "read": re-read what is stored first, no lock; "plain": neither (one
   * conditional statement that needs no decision on shared state). What
   * `fn` leaves for later runs once its changes are committed; after a
   * rolled-back turn, none of it does (SQLite commits each write itself, so
   * there it all runs).
   */
  private inTurn<T>(fn: () => Promise<T>, mode: "exclusive" | "read" | "plain" = "exclusive"): Promise<T> {
    const exclusive = mode === "exclusive";
    const within = (turn: (store: LeaseStore) => Promise<T>) => (exclusive ? this.base.exclusive(turn) : turn(this.base));
    const once = () =>
      within(async (tx) => {
        this.store = tx;
        this.queue.bind(tx);
        try {
          if (this.shared && mode !== "plain") await this.reload(exclusive);
          return await fn();
        } finally {
          this.store = this.base;
          this.queue.bind(this.base);
        }
      });
    const run = async (): Promise<T> => {
      for (let attempt = 1;; attempt++) {
        try {
          const result = await once();
          for (const f of this.after.splice(0)) f();
          return result;
        } catch (err) {
          // SQLite commits each write itself: what it stored before failing stands, and so do its effects.
          const later = this.after.splice(0);
          if (!this.shared) { for (const f of later) f(); }
          // Replicas: a phone taken meanwhile by another replica's grant at once (no lock): decide again on what is stored.
          if (!(this.shared && exclusive && isUniqueViolation(err) && attempt < 5)) throw err;
        }
      }
    };
    const result = this.turn.then(run);
    this.turn = result.catch(() => undefined);
    return result;
  }

  /**
   * Applies to memory a change the database has committed (a statement run
   * outside any turn), then at once what that leaves for later: only what
   * `sync` added, since it runs without a break, never another turn's.
   */
  private committed<T>(sync: () => T): T {
    const mark = this.after.length;
    try {
      return sync();
    } finally {
      for (const f of this.after.splice(mark)) f();
    }
  }

  /** Once the current turn's changes are committed. */
  private later(f: () => void): void {
    this.after.push(f);
  }

  /** Tells the other replicas, once committed. */
  private tell(kind: "lease" | "queue", id: string, row?: LeaseRow): void {
    const shared = this.shared;
    if (!shared) return;
    // A copy as committed now: the object in memory changes with later renewals.
    const sent = row && { ...row };
    this.later(() => this.kick(shared.publish(kind, id, sent)));
  }

  /** A waiter whose caller waits on another live replica. */
  private heldElsewhere(w: Waiter): boolean {
    return this.shared !== undefined && w.replicaId !== null && w.replicaId !== this.shared.replicaId && this.shared.isLive(w.replicaId);
  }

  /** Takes what is stored as the truth (another replica may have changed it), telling watchers what changed. */
  private async reload(exclusive: boolean): Promise<void> {
    // The queue before the leases: a place granted between the two reads shows up as its lease.
    const waiters = await this.store.waiters();
    const rows = await this.store.activeLeases();
    const now = this.now();
    const ids = new Set(rows.map((r) => r.leaseId));
    for (const cur of [...this.active.values()]) {
      if (ids.has(cur.leaseId)) continue;
      this.rememberEnded(cur.leaseId);
      this.active.delete(cur.physicalId);
      this.byToken.delete(cur.tokenHash);
      const ended = await this.store.leaseById(cur.leaseId);
      cur.state = ended && ended.state !== "active" ? ended.state : "released";
      cur.endedAt = ended?.endedAt ?? now;
      this.ending(cur);
      this.later(() => this.events.emit("leaseEnded", cur, "elsewhere"));
    }
    for (const row of rows) {
      const cur = this.active.get(row.physicalId);
      if (cur?.leaseId === row.leaseId) {
        if (cur.expiresAt === row.expiresAt && cur.ttlMs === row.ttlMs) continue;
        cur.expiresAt = row.expiresAt;
        cur.ttlMs = row.ttlMs;
        this.later(() => this.events.emit("lease", cur));
        continue;
      }
      this.active.set(row.physicalId, row);
      this.byToken.set(row.tokenHash, row);
      this.later(() => this.events.emit("lease", row));
    }
    if (this.queue.replaceRows(waiters, now, (w) => this.heldElsewhere(w))) this.queueChanged();
    // Places of callers here that another replica granted (or dropped) since.
    for (const [ticket, call] of this.queue.unqueuedCalls()) {
      const lease = this.byToken.get(hash(call.token));
      // Dropped is decided only on what the lock shows: a plain read may sit between two commits.
      if (!lease && !exclusive) continue;
      this.queue.detach(ticket, call);
      if (lease) this.handOver(call, lease);
      else this.later(() => call.fail(farmError(Errors.LEASE_WAIT_CANCELLED, "this caller's place in the queue was dropped")));
    }
  }

  /** The first free candidate (in agent, serial order) the selector accepts. */
  private pick(candidates: Candidate[], s: Selector): Candidate | undefined {
    return candidates.find((r) => !this.active.has(r.physicalId) && this.accepts(r, s));
  }

  /** Whether the selector accepts this phone (leased or not). */
  private accepts(r: Candidate, s: Selector): boolean {
    if (s.physicalId && s.physicalId !== r.physicalId) return false;
    if (s.serial && r.serial !== s.serial) return false;
    if (s.agent && r.agentId !== s.agent && r.agentName !== s.agent) return false;
    if (s.model && r.model !== s.model) return false;
    if (s.apiLevelMin && r.apiLevel < s.apiLevelMin) return false;
    if (s.apiLevelMax && r.apiLevel > s.apiLevelMax) return false;
    return this.labels.matches(r.physicalId, s.labels);
  }

  /** Commits a lease (with the waiter's removal, when it was queued) before anyone is told. */
  private async grant(holder: string, ttlMs: number, route: Candidate, tokenHash: string, waiter?: Waiter): Promise<LeaseRow> {
    const lease = leaseRow(holder, ttlMs, route, tokenHash, this.now());
    const queued = waiter !== undefined && this.queue.has(waiter);
    await this.store.insertLease(lease, queued ? waiter.ticket : undefined);
    if (queued) this.queue.granted(waiter);
    this.active.set(lease.physicalId, lease);
    this.byToken.set(lease.tokenHash, lease);
    this.later(() => this.events.emit("lease", lease));
    this.tell("lease", lease.leaseId, lease);
    if (queued) this.queueChanged();
    return lease;
  }

  /** Ends an active lease; false when it had ended already (elsewhere), which memory then forgets too. */
  private async end(lease: LeaseRow, state: "released" | "expired"): Promise<boolean> {
    if (this.active.get(lease.physicalId) !== lease) return false;
    const endedAt = this.now();
    if (!(await this.store.endLease(lease.leaseId, state, endedAt))) {
      this.active.delete(lease.physicalId);
      this.byToken.delete(lease.tokenHash);
      return false;
    }
    this.active.delete(lease.physicalId);
    this.byToken.delete(lease.tokenHash);
    if (this.shared) this.rememberEnded(lease.leaseId);
    lease.state = state;
    lease.endedAt = endedAt;
    this.ending(lease);
    this.later(() => this.events.emit("leaseEnded", lease, "here"));
    this.tell("lease", lease.leaseId, lease);
    return true;
  }

  /**
   * The grant at once of a replica (no lock): when nobody is queued here nor
   * in the database, one statement takes a matching phone the database
   * shows free (memory may lag another replica's change by a notice). The
   * phones are tried from a random start, the ones free by what this
   * replica knows first, so replicas granting at once mostly try different
   * phones. Undefined sends the caller down the locked path (queue, or a
   * grant decided on what is stored).
   */
  private async grantIfFree(holder: string, selector: Selector, ttlMs: number, ticket: string, token: string, signal: AbortSignal): Promise<Grant | undefined> {
    if (signal.aborted || this.queue.size > 0 || this.queue.find(ticket)) return undefined;
    const matching = this.registry.candidates().filter((r) => this.accepts(r, selector));
    if (matching.length === 0) return undefined;
    const start = randomInt(matching.length);
    const rotated = [...matching.slice(start), ...matching.slice(0, start)];
    const phones: LeasePhone[] = [...rotated.filter((r) => !this.active.has(r.physicalId)), ...rotated.filter((r) => this.active.has(r.physicalId))]
      .map((r) => ({ physicalId: r.physicalId, agentId: r.agentId, serial: r.serial }));
    const now = this.now();
    const template = { leaseId: randomUUID(), tokenHash: hash(token), holder, acquiredAt: now, expiresAt: now + ttlMs, ttlMs, state: "active" as const, endedAt: null };
    // A second try only for a race lost at the unique index (the first sees that phone taken now).
    for (let attempt = 0; attempt < 2; attempt++) {
      const phone = await this.base.insertLeaseOnAnyFree(template, phones);
      if (!phone) continue;
      const lease: LeaseRow = { ...template, ...phone };
      return this.committed(() => {
        const stale = this.active.get(lease.physicalId);
        // Memory had another lease on it: that one ended elsewhere (its notice is on the way).
        if (stale) this.ended({ ...stale, state: "released", endedAt: now });
        this.active.set(lease.physicalId, lease);
        this.byToken.set(lease.tokenHash, lease);
        this.later(() => this.events.emit("lease", lease));
        this.tell("lease", lease.leaseId, lease);
        return { lease, token };
      });
    }
    return undefined;
  }

  /** Memory follows a lease the store ended (here or, by its notice, elsewhere). */
  private ended(row: LeaseRow, origin: "here" | "elsewhere" = "elsewhere", sessions?: "none"): void {
    this.rememberEnded(row.leaseId);
    // Whichever replica ended it: the hooks decide (the cleanup runs where the lease's baseline was read).
    this.ending(row);
    const cur = this.active.get(row.physicalId);
    if (cur?.leaseId !== row.leaseId) {
      // Not known active here (its grant notice may still come): only its token goes. Ended by this
      // replica all the same: its watchers and what hangs off the lease (sessions) hear of it.
      if (this.byToken.get(row.tokenHash)?.leaseId === row.leaseId) this.byToken.delete(row.tokenHash);
      if (origin === "here") this.later(() => this.events.emit("leaseEnded", row, "here", sessions));
      return;
    }
    this.active.delete(cur.physicalId);
    this.byToken.delete(cur.tokenHash);
    cur.state = row.state;
    cur.endedAt = row.endedAt;
    this.later(() => this.events.emit("leaseEnded", cur, origin, sessions));
  }

  /** Memory follows an active lease as stored (granted or renewed elsewhere). */
  private learned(row: LeaseRow): void {
    const cur = this.active.get(row.physicalId);
    if (cur?.leaseId === row.leaseId) {
      if (cur.expiresAt === row.expiresAt && cur.ttlMs === row.ttlMs) return;
      cur.expiresAt = row.expiresAt;
      cur.ttlMs = row.ttlMs;
      this.later(() => this.events.emit("lease", cur));
      return;
    }
    // Another lease on the phone by memory: the database has one active lease per phone, so that one ended.
    if (cur) this.ended({ ...cur, state: "released", endedAt: this.now() });
    const lease = { ...row };
    this.active.set(lease.physicalId, lease);
    this.byToken.set(lease.tokenHash, lease);
    this.later(() => this.events.emit("lease", lease));
  }

  private rememberEnded(leaseId: string): void {
    this.endedIds.add(leaseId);
    if (this.endedIds.size > ENDED_MEMORY) this.endedIds.delete(this.endedIds.values().next().value as string);
  }

  private async removeWaiter(w: Waiter): Promise<void> {
    if (await this.queue.remove(w)) this.queueChanged();
  }

  private queueChanged(): void {
    this.tell("queue", "*");
    this.later(() => {
      if (this.events.listenerCount("queue") > 0) this.events.emit("queue", this.queue.list());
    });
  }

  private holds(lease: LeaseRow, tokenName: string, leaseToken: string | null): boolean {
    return lease.holder === tokenName || (leaseToken !== null && leaseToken !== "" && hash(leaseToken) === lease.tokenHash);
  }

  private async unknownToken(token: string, store: LeaseStore = this.store): Promise<Error> {
    const row = await store.leaseByTokenHash(hash(token));
    if (row?.state === "expired") return farmError(Errors.LEASE_EXPIRED, `lease ${row.leaseId} expired at ${new Date(row.expiresAt).toISOString()}; acquire a new one`, "lease");
    if (row?.state === "released") return farmError(Errors.LEASE_RELEASED, `lease ${row.leaseId} was released`, "lease");
    return farmError(Errors.LEASE_NOT_FOUND, "no such lease", "lease");
  }

  private requirePhysical(serial: string): string {
    const id = this.registry.physicalIdOf(serial);
    if (!id) throw this.registry.unresolvedSerial(serial, "device");
    return id;
  }
}

/** A mutation needs the caller's lease on the phone: `lease` is its active lease, if any. */
function checkLease(physicalId: string, lease: LeaseRow | undefined, leaseToken: string | null): LeaseRow {
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

/** PostgreSQL's unique_violation, as pg raises it or as drizzle wraps it. */
function isUniqueViolation(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { code?: unknown }).code === "23505") return true;
  }
  return false;
}

/**
 * A lease is renewed or released by its holder (any process of that user)
 * or an admin: a lease token that reached someone else is not enough.
 */
function requireLeaseHolder(lease: LeaseRow, caller: LeaseCaller, what: "renew" | "release"): void {
  if (caller.admin || caller.tokenName === lease.holder) return;
  throw farmError(
    Errors.LEASE_HELD_BY_OTHER,
    `lease ${lease.leaseId} on ${lease.serial} is held by ${lease.holder}; only they (with their own token) or an admin may ${what} it`,
    "lease",
    { dispatched: false, ambiguous: false },
  );
}

/** A new active lease on the route's phone. */
function leaseRow(holder: string, ttlMs: number, route: Candidate, tokenHash: string, now: number): LeaseRow {
  return {
    leaseId: randomUUID(),
    tokenHash,
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
}

/** Oldest first; the lease id breaks ties so the order is total (the paging key). */
function byAcquired(a: LeaseRow, b: LeaseRow): number {
  return a.acquiredAt - b.acquiredAt || (a.leaseId < b.leaseId ? -1 : a.leaseId > b.leaseId ? 1 : 0);
}
