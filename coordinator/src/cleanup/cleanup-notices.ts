import type { Logger } from "@farm/shared/log";
import type { ChangeBus } from "../replicas/change-bus.js";
import type { CleanupNotice, DeviceCleanups } from "./device-cleanups.js";

const STATES: ReadonlySet<string> = new Set(["leased", "cleaning", "needs-attention", "none"]);

/** A cleanup notice as it came over the bus, checked field by field; undefined when it is not one. */
export function cleanupNoticeOf(data: unknown): CleanupNotice | undefined {
  if (typeof data !== "object" || data === null) return undefined;
  const d = data as Record<string, unknown>;
  const str = (k: string, max: number) => typeof d[k] === "string" && (d[k] as string).length <= max;
  if (!str("physicalId", 512) || !str("leaseId", 512) || !str("reason", 2_000) || !STATES.has(String(d["state"]))) return undefined;
  if (typeof d["since"] !== "number" || !Number.isFinite(d["since"])) return undefined;
  return { physicalId: d["physicalId"] as string, state: d["state"] as CleanupNotice["state"], leaseId: d["leaseId"] as string, reason: d["reason"] as string, since: d["since"] };
}

/**
 * Phones' cleanup state on every replica: each change is told over the
 * change bus (kind "cleanup", the row without its baseline) and applied by
 * the others, so a phone cleaning or needing attention is held out of
 * leases on all of them, including for callers already queued there, and
 * an admin clears it through any. A replica that may have missed notices
 * re-reads the stored rows.
 */
export function shareCleanups(cleanups: DeviceCleanups, bus: ChangeBus, log: Logger): void {
  const failed = (what: string) => (err: unknown) => log.error(`replicas: ${what} failed`, { error: (err as Error).message });
  cleanups.share((n) => bus.publish("cleanup", n.physicalId, n).catch(failed("telling other replicas about a phone's cleanup")));
  bus.events.on("change", (c) => {
    if (c.kind !== "cleanup") return;
    const n = cleanupNoticeOf(c.data);
    if (n && n.physicalId === c.id) cleanups.applyNotice(n);
    else cleanups.resync().catch(failed("re-reading phones' cleanup state"));
  });
  bus.events.on("resync", () => void cleanups.resync().catch(failed("re-reading phones' cleanup state")));
  // What the others changed between this replica's first read and now.
  cleanups.resync().catch(failed("re-reading phones' cleanup state"));
}
