import type { LeaseRow } from "../lease-store.js";

/** An active lease row on agent a-1's serial S-1, for store tests: its token hash is named after its id. */
export function activeLease(leaseId: string, physicalId: string, holder = "h"): LeaseRow {
  return { leaseId, tokenHash: `hash-${leaseId}`, holder, physicalId, agentId: "a-1", serial: "S-1", acquiredAt: 1, expiresAt: 2, ttlMs: 1, state: "active", endedAt: null };
}
