import type { Logger } from "@farm/shared/log";
import { AgentControlService } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { LeaseRow } from "../leases/lease-store.js";
import type { Registry } from "../registry/registry.js";
import type { AgentCaller } from "../routing/agent-session.js";

/** How long the agent gets to close the lease's tunnels and settle what they left. */
const END_LEASE_TIMEOUT_MS = 10_000;

/** How many recent lease ends a replica remembers having told, so one lease's end is told once. */
const TOLD_MEMORY = 1_000;

/**
 * When a lease ends, tells the agent of its phone (EndLease): the lease's
 * tunnels close, and a raw-adb action an agent killed with a tunnel open
 * left unresolved is settled as abandoned, "lease ended", so the phone is
 * not blocked for the next holder. An agent offline now keeps the entry;
 * the next lease holder (or an admin) may abandon it.
 *
 * On replicas only the replica holding the agent's stream tells it, on that
 * stream, whichever replica ended the lease (every replica learns every
 * end): once per lease instead of once per replica, and no forwarded call.
 */
export function settleRawAdbOnLeaseEnd(deps: { registry: Registry; leases: LeaseManager; log: Logger }, opts: { cleanedElsewhere?: (lease: LeaseRow) => boolean } = {}): void {
  const told = new Set<string>();
  deps.leases.events.on("endLearned", (lease: LeaseRow) => {
    // Another replica holds the agent's stream: that one tells it.
    if (deps.registry.agentSession(lease.agentId)?.session.replicaId) return;
    if (told.has(lease.leaseId)) return;
    told.add(lease.leaseId);
    if (told.size > TOLD_MEMORY) told.delete(told.values().next().value as string);
    // A lease whose phone is cleaned: its cleanup tells the agent first, then cleans.
    if (opts.cleanedElsewhere?.(lease)) return;
    void endLeaseOnAgent(deps, lease);
  });
}

export async function endLeaseOnAgent(deps: { registry: Registry; log: Logger }, lease: LeaseRow): Promise<void> {
  const attached = deps.registry.agentSession(lease.agentId);
  if (!attached) {
    deps.log.info("a lease ended while its agent is offline: a tunnel's action it left unresolved stays until abandoned", { leaseId: lease.leaseId, agentId: lease.agentId });
    return;
  }
  try {
    const res = await (attached.session as AgentCaller).call(
      AgentControlService.method.endLease,
      { leaseId: lease.leaseId, reason: lease.state },
      { tokenName: lease.holder, admin: false },
      Date.now() + END_LEASE_TIMEOUT_MS,
    );
    if (res.abandonedActionIds.length > 0) deps.log.info("a lease's end settled remote adb actions left unresolved", { leaseId: lease.leaseId, actionIds: res.abandonedActionIds });
  } catch (err) {
    deps.log.warn("could not tell the agent a lease ended; a tunnel's action it left unresolved stays until abandoned", { leaseId: lease.leaseId, agentId: lease.agentId, error: (err as Error).message });
  }
}
