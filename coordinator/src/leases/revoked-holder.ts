import type { Logger } from "@farm/shared/log";
import type { ActivityEntry, ActivityLog } from "../activity/activity-log.js";
import type { LeaseManager } from "./lease-manager.js";
import { describeSelector } from "./selector.js";

export interface RevokedHolderDeps {
  leases: LeaseManager;
  /** Ends the recorded sessions of an ended lease (status lease-ended). */
  sessions: { endForLease(leaseId: string): Promise<unknown> };
  activity: ActivityLog;
  log: Logger;
}

/**
 * A revoked token holds nothing: its leases end (the phones go to the next
 * waiters; the adb tunnels, live screens and sessions on them end with the
 * lease, as with any lease's end) and its places in the queue are dropped.
 * Each is journaled in the activity log with who revoked it. `by` is the
 * revoking admin; undefined when the revocation came through another
 * replica, which ended what was stored then (this one ends what slipped in
 * meanwhile, a grant made here before it heard).
 */
export async function endWhatRevokedHeld(deps: RevokedHolderDeps, holder: string, by: string | undefined, endCalls?: () => void): Promise<{ leases: number; waiters: number }> {
  // Leases and waits first, while its waiting calls still hold their places (so each is journaled here);
  // then its calls end, whatever happened; then again, for a grant made to a call that was past its
  // token check (the calls' end stops any after it).
  let first: Awaited<ReturnType<LeaseManager["revokeHolder"]>>;
  try {
    first = await deps.leases.revokeHolder(holder);
  } finally {
    endCalls?.();
  }
  const second = await deps.leases.revokeHolder(holder);
  const leases = [...first.leases, ...second.leases];
  const waiters = [...first.waiters, ...second.waiters];
  // Sessions also end on the lease's end event; awaited here so that the revocation's answer comes after them.
  for (const l of leases) {
    await deps.sessions.endForLease(l.leaseId).catch((err: unknown) => {
      deps.log.error("could not end the sessions of a revoked holder's lease; they end at the next start", { leaseId: l.leaseId, error: (err as Error).message });
    });
  }
  const who = by === undefined ? "through another replica" : `by ${by}`;
  const at = Date.now();
  const entry = { at, caller: by ?? "", command: "revokeToken", outcome: "ok", durationMs: 0, requestId: "" };
  const entries: ActivityEntry[] = [
    ...leases.map((l) => ({ ...entry, leaseId: l.leaseId, serial: l.serial, physicalId: l.physicalId, agentId: l.agentId, detail: `token "${holder}" revoked ${who}: its lease ended, the phone is free` })),
    ...waiters.map((w) => ({ ...entry, leaseId: "", serial: w.selector.serial, physicalId: w.selector.physicalId, agentId: "", detail: `token "${holder}" revoked ${who}: its wait for ${describeSelector(w.selector)} is dropped` })),
  ];
  if (by !== undefined) {
    entries.push({ ...entry, leaseId: "", serial: "", physicalId: "", agentId: "", detail: `token "${holder}" revoked by ${by}: ${leases.length} lease(s) ended, ${waiters.length} wait(s) dropped` });
  }
  for (const e of entries) {
    // The revocation and what it ended stand whatever the journal does (a failed write is logged and counted).
    await deps.activity.recordAfter(e);
  }
  return { leases: leases.length, waiters: waiters.length };
}
