import { actionError, Errors, farmError } from "@farm/shared/errors";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { LeaseRow } from "../leases/lease-store.js";
import type { Registry, Route } from "../registry/registry.js";
import { AttachSession } from "../routing/agent-session.js";

const notDispatched = { dispatched: false, ambiguous: false };

/**
 * The route of a stream another replica carries to this one (a live
 * screen, an adb tunnel), checked again here, where the agent is: the
 * agent's control stream is held by this replica (a stream is never passed
 * on a second time), the serial is the phone the other replica named, and
 * the lease it was opened under is still the phone's active lease in the
 * database. `leaseId` "" (an admin's screen) needs no lease.
 */
export async function relayedRoute(
  deps: { registry: Registry; leases: LeaseManager },
  req: { agentId: string; serial: string; physicalId: string; leaseId: string },
): Promise<{ route: Route<AttachSession>; lease: LeaseRow | undefined }> {
  const r = deps.registry.route(req.serial, req.agentId);
  if (!(r.session instanceof AttachSession) || r.session.signal.aborted || r.agentId !== req.agentId) {
    throw actionError(Errors.AGENT_OFFLINE, `agent ${req.agentId} is not attached to this coordinator replica`, notDispatched);
  }
  if (r.physicalId === "" || r.physicalId !== req.physicalId) {
    throw actionError(Errors.DEVICE_NOT_FOUND, `serial ${req.serial} on agent ${r.agentName} is not the phone ${req.physicalId}`, notDispatched, "target.serial");
  }
  const lease = await deps.leases.storedLeaseOf(r.physicalId);
  if (req.leaseId !== "" && lease?.leaseId !== req.leaseId) {
    throw farmError(Errors.LEASE_RELEASED, `the lease ${req.leaseId} on ${r.physicalId} is no longer active`, "lease", notDispatched);
  }
  return { route: r as Route<AttachSession>, lease };
}
