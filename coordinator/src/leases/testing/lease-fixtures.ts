import type { SessionRow } from "../../sessions/session-store.js";
import type { LeaseRow } from "../lease-store.js";

/** An active lease row on agent a-1's serial S-1, for store tests: its token hash is named after its id. */
export function activeLease(leaseId: string, physicalId: string, holder = "h"): LeaseRow {
  return { leaseId, tokenHash: `hash-${leaseId}`, holder, physicalId, agentId: "a-1", serial: "S-1", acquiredAt: 1, expiresAt: 2, ttlMs: 1, state: "active", endedAt: null };
}

/** A running session row under `leaseId` on pd-1 (serial S-1, agent a-1), for store tests. */
export function runningSession(sessionId: string, leaseId: string, owner = "h"): SessionRow {
  return {
    sessionId,
    name: "n",
    physicalId: "pd-1",
    serial: "S-1",
    agentId: "a-1",
    leaseId,
    owner,
    status: "running",
    createdAt: 1,
    endedAt: null,
    stepCount: 0,
    failedStepCount: 0,
    context: {},
    ocr: false,
    policyJson: "",
    policySha256: "",
    secretNames: [],
  };
}
