import { Errors, farmError } from "@farm/shared/errors";
import type { DeviceHold } from "../registry/registry.js";
import type { CleanupRow, CleanupState, DeviceCleanupStore } from "./device-cleanup-store.js";

/** What a phone held when its lease was granted. */
export interface Baseline {
  packages: string[];
  paths: string[];
  /** Settings the cleanup puts back when the lease changed them (the screen's rotation); absent in a baseline stored before. */
  settings?: { namespace: string; key: string; value: string }[];
}

/**
 * A phone's cleanup state as one replica tells the others (change bus kind
 * "cleanup"): the row without its baseline (only the replica that read it
 * cleans), or "none" once the phone is back in the pool.
 */
export interface CleanupNotice {
  physicalId: string;
  state: CleanupState | "none";
  leaseId: string;
  reason: string;
  since: number;
}

/** A row as held in memory: `elsewhere` when another replica owns it (it read the baseline and runs the cleanup). */
type HeldRow = CleanupRow & { elsewhere?: boolean };

/** A lease, as far as its cleanup needs it. */
export interface CleanupLease {
  leaseId: string;
  physicalId: string;
}

/**
 * Each phone's cleanup between users: the baseline read at grant, then
 * "cleaning" once its lease ends, then either gone (back in the pool) or
 * "needs-attention" with the reason until an admin clears it. Memory is
 * the truth for this process and writes go through to the store; the
 * holds (cleaning, needs-attention) are told to `onHold` so leases skip
 * the phone. A cleanup a restart cut short is not assumed done: it comes
 * back needs-attention.
 */
export class DeviceCleanups {
  private readonly rows = new Map<string, HeldRow>();
  /** Tells the other replicas of each change made here (set by share()). */
  private publish: (notice: CleanupNotice) => Promise<void> = async () => {};
  /** Changes applied so far (here or by notice): a resync's read taken before the latest one is stale. */
  private version = 0;

  private constructor(
    private readonly store: DeviceCleanupStore,
    private readonly onHold: (physicalId: string, hold: DeviceHold | undefined) => void,
    private readonly now: () => number,
  ) {}

  /**
   * Reads what is stored. `activeLeaseIds`: the leases still active; a
   * baseline of one that ended while this coordinator was down, and a
   * cleanup it was running, become needs-attention (nobody saw them done).
   */
  static async open(
    store: DeviceCleanupStore,
    activeLeaseIds: ReadonlySet<string>,
    onHold: (physicalId: string, hold: DeviceHold | undefined) => void,
    now: () => number = Date.now,
  ): Promise<DeviceCleanups> {
    const c = new DeviceCleanups(store, onHold, now);
    for (const row of await store.all()) {
      let r = row;
      if (r.state === "cleaning") r = { ...r, state: "needs-attention", reason: "its cleanup was cut short: the coordinator stopped during it", since: now() };
      else if (r.state === "leased" && !activeLeaseIds.has(r.leaseId)) r = { ...r, state: "needs-attention", reason: "its lease ended while the coordinator was stopped: it was not cleaned", since: now() };
      if (r !== row) await store.put(r);
      c.rows.set(r.physicalId, r);
      if (r.state === "needs-attention") onHold(r.physicalId, { state: "needs-attention", reason: r.reason });
    }
    return c;
  }

  /** The baseline read as the lease was granted, or why there is none (`problem`). */
  async recordBaseline(lease: CleanupLease, baseline: Baseline | undefined, problem: string): Promise<void> {
    const row: CleanupRow = { physicalId: lease.physicalId, state: "leased", leaseId: lease.leaseId, reason: problem, baseline: baseline ? JSON.stringify(baseline) : "", since: this.now() };
    this.rows.set(row.physicalId, row);
    await this.store.put(row);
    // Told before the holder gets the token: the others know the lease's phone is cleaned after it, before any of them can see it end.
    await this.tell(row);
  }

  /**
   * The lease ended: its phone is held out of the pool at once (memory,
   * synchronously) and the store follows. False when the lease has no
   * baseline here (granted before the policy, never handed out, or granted
   * through another replica, which cleans it), or its cleanup already began.
   */
  beginCleaning(lease: CleanupLease): { started: false } | { started: true; stored: Promise<void> } {
    const row = this.rows.get(lease.physicalId);
    if (!row || row.leaseId !== lease.leaseId || row.state !== "leased") return { started: false };
    const next: HeldRow = { ...row, state: "cleaning", since: this.now() };
    this.rows.set(next.physicalId, next);
    this.version++;
    this.onHold(next.physicalId, { state: "cleaning", reason: "" });
    // Another replica's lease: that replica cleans it; here the phone is only held until its outcome comes.
    if (row.elsewhere) return { started: false };
    return { started: true, stored: this.store.put(next).then(() => this.tell(next)) };
  }

  /** The baseline of the lease being cleaned, or why there is none. */
  baselineOf(lease: CleanupLease): { baseline: Baseline } | { problem: string } {
    const row = this.rows.get(lease.physicalId);
    if (!row || row.leaseId !== lease.leaseId) return { problem: "no baseline was read for this lease" };
    if (row.baseline === "") return { problem: row.reason || "no baseline was read for this lease" };
    return { baseline: JSON.parse(row.baseline) as Baseline };
  }

  /** The cleanup succeeded: the phone goes back to the pool. */
  async cleaned(lease: CleanupLease): Promise<void> {
    const row = this.rows.get(lease.physicalId);
    if (!row || row.leaseId !== lease.leaseId) return;
    await this.store.delete(lease.physicalId);
    this.rows.delete(lease.physicalId);
    this.version++;
    this.onHold(lease.physicalId, undefined);
    await this.tell({ ...row, state: "none" });
  }

  /** The cleanup failed (or could not run): the phone stays out of the pool until an admin clears it. */
  async needsAttention(lease: CleanupLease, reason: string): Promise<void> {
    const row: CleanupRow = { physicalId: lease.physicalId, state: "needs-attention", leaseId: lease.leaseId, reason, baseline: "", since: this.now() };
    this.rows.set(row.physicalId, row);
    this.version++;
    this.onHold(row.physicalId, { state: "needs-attention", reason });
    await this.store.put(row);
    await this.tell(row);
  }

  /** An admin has seen to the phone: back in the pool. Returns the reason it was marked with. */
  async clear(physicalId: string): Promise<string> {
    const row = this.rows.get(physicalId);
    if (!row || row.state === "leased") throw farmError(Errors.NOT_FOUND, `device ${physicalId} is not marked needs-attention`, "device");
    if (row.state === "cleaning") throw farmError(Errors.DEVICE_BUSY, `device ${physicalId} is being cleaned; its outcome comes within the policy's timeout`, "device");
    await this.store.delete(physicalId);
    this.rows.delete(physicalId);
    this.version++;
    this.onHold(physicalId, undefined);
    await this.tell({ ...row, state: "none" });
    return row.reason;
  }

  /**
   * The lease ended with no cleanup policy in force (it was turned off):
   * its baseline goes, so the phone is not held for a cleanup nobody runs.
   */
  forget(lease: CleanupLease): Promise<void> {
    const row = this.rows.get(lease.physicalId);
    if (!row || row.leaseId !== lease.leaseId || row.state !== "leased") return Promise.resolve();
    // Another replica's baseline: that replica runs its policy; held here until it tells the outcome.
    if (row.elsewhere) {
      this.beginCleaning(lease);
      return Promise.resolve();
    }
    this.rows.delete(lease.physicalId);
    return this.store.delete(lease.physicalId).then(() => this.tell({ ...row, state: "none" }));
  }

  /**
   * Replicas: each change made here is told to the others (after it is
   * stored), so a phone cleaning or needing attention is held out of leases
   * on every replica, and cleared on any.
   */
  share(publish: (notice: CleanupNotice) => Promise<void>): void {
    this.publish = publish;
  }

  /**
   * Another replica's change. A "leased" row is that replica's baseline
   * (kept here without it): when its lease ends, this replica holds the
   * phone (beginCleaning) until that replica tells the outcome.
   */
  applyNotice(n: CleanupNotice): void {
    const cur = this.rows.get(n.physicalId);
    this.version++;
    if (n.state === "none") {
      // Only the row the notice is about: a newer lease's baseline read here stays.
      if (!cur || cur.leaseId !== n.leaseId) return;
      this.rows.delete(n.physicalId);
      this.onHold(n.physicalId, undefined);
      return;
    }
    this.rows.set(n.physicalId, { physicalId: n.physicalId, state: n.state, leaseId: n.leaseId, reason: n.reason, baseline: "", since: n.since, elsewhere: true });
    this.onHold(n.physicalId, n.state === "leased" ? undefined : { state: n.state, reason: n.reason });
  }

  /**
   * Notices may have been missed: what is stored is taken as the truth for
   * every phone whose row is not this replica's own. A read that a notice
   * overtook is read again.
   */
  async resync(): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const at = this.version;
      const stored = await this.store.all();
      if (at !== this.version) continue;
      const seen = new Set<string>();
      for (const r of stored) {
        seen.add(r.physicalId);
        const cur = this.rows.get(r.physicalId);
        if (cur && !cur.elsewhere) continue;
        if (cur?.state === r.state && cur.leaseId === r.leaseId && cur.reason === r.reason) continue;
        this.applyNotice({ physicalId: r.physicalId, state: r.state, leaseId: r.leaseId, reason: r.reason, since: r.since });
      }
      for (const cur of [...this.rows.values()]) {
        if (cur.elsewhere && !seen.has(cur.physicalId)) this.applyNotice({ physicalId: cur.physicalId, state: "none", leaseId: cur.leaseId, reason: "", since: this.now() });
      }
      return;
    }
  }

  private tell(row: CleanupRow | CleanupNotice): Promise<void> {
    return this.publish({ physicalId: row.physicalId, state: row.state, leaseId: row.leaseId, reason: row.reason, since: row.since });
  }

  /** A phone's row, as held here. */
  rowOf(physicalId: string): CleanupRow | undefined {
    return this.rows.get(physicalId);
  }
}
