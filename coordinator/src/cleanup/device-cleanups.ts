import { Errors, farmError } from "@farm/shared/errors";
import type { DeviceHold } from "../registry/registry.js";
import type { CleanupRow, DeviceCleanupStore } from "./device-cleanup-store.js";

/** What a phone held when its lease was granted. */
export interface Baseline {
  packages: string[];
  paths: string[];
}

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
  private readonly rows = new Map<string, CleanupRow>();

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
    const next: CleanupRow = { ...row, state: "cleaning", since: this.now() };
    this.rows.set(next.physicalId, next);
    this.onHold(next.physicalId, { state: "cleaning", reason: "" });
    return { started: true, stored: this.store.put(next) };
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
    this.onHold(lease.physicalId, undefined);
  }

  /** The cleanup failed (or could not run): the phone stays out of the pool until an admin clears it. */
  async needsAttention(lease: CleanupLease, reason: string): Promise<void> {
    const row: CleanupRow = { physicalId: lease.physicalId, state: "needs-attention", leaseId: lease.leaseId, reason, baseline: "", since: this.now() };
    this.rows.set(row.physicalId, row);
    this.onHold(row.physicalId, { state: "needs-attention", reason });
    await this.store.put(row);
  }

  /** An admin has seen to the phone: back in the pool. Returns the reason it was marked with. */
  async clear(physicalId: string): Promise<string> {
    const row = this.rows.get(physicalId);
    if (!row || row.state === "leased") throw farmError(Errors.NOT_FOUND, `device ${physicalId} is not marked needs-attention`, "device");
    if (row.state === "cleaning") throw farmError(Errors.DEVICE_BUSY, `device ${physicalId} is being cleaned; its outcome comes within the policy's timeout`, "device");
    await this.store.delete(physicalId);
    this.rows.delete(physicalId);
    this.onHold(physicalId, undefined);
    return row.reason;
  }

  /**
   * The lease ended with no cleanup policy in force (it was turned off):
   * its baseline goes, so the phone is not held for a cleanup nobody runs.
   */
  forget(lease: CleanupLease): Promise<void> {
    const row = this.rows.get(lease.physicalId);
    if (!row || row.leaseId !== lease.leaseId || row.state !== "leased") return Promise.resolve();
    this.rows.delete(lease.physicalId);
    return this.store.delete(lease.physicalId);
  }

  /** A phone's row, as held here. */
  rowOf(physicalId: string): CleanupRow | undefined {
    return this.rows.get(physicalId);
  }
}
