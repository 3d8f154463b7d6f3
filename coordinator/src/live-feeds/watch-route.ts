import type { DescMethod } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import { requirePrincipal } from "../auth/auth.js";
import type { Principal } from "../auth/token-store.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { LeaseRow } from "../leases/lease-store.js";
import type { Registry, Route } from "../registry/registry.js";
import type { AgentCaller } from "../routing/agent-session.js";
import { routeFor } from "../routing/device-service.js";

/**
 * Who may watch a phone's feed (its live screen, its live logcat), checked
 * before anything starts: the lease holder on that phone, or an admin.
 * Someone else's phone is theirs (lease_holder_only), and a free phone's
 * feed is for whoever leases it, not for every viewer.
 */
export async function watchRoute(
  deps: { registry: Registry; leases: LeaseManager },
  target: { serial: string; agent: string } | undefined,
  ctx: HandlerContext,
  method: DescMethod,
  what: string,
): Promise<{ principal: Principal; route: Omit<Route, "session"> & { session: AgentCaller }; lease: LeaseRow | undefined }> {
  const principal = requirePrincipal(ctx);
  const serial = target?.serial ?? "";
  if (!serial) throw invalidArgument("target.serial", "a device serial is required");
  const r = await routeFor(deps, serial, target?.agent ?? "", false, ctx.requestHeader.get("x-farm-lease"), { method, caller: principal });
  const lease = deps.leases.leaseOf(r.physicalId);
  if (!principal.admin && !lease) throw farmError(Errors.LEASE_REQUIRED, `the ${what} of ${serial} is for its lease holder; lease it first (farm lease acquire)`, "lease");
  return { principal, route: { ...r, session: r.session as AgentCaller }, lease };
}
