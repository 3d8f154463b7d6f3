import { create } from "@bufbuild/protobuf";
import { invalidArgument } from "@farm/shared/errors";
import { RelayScreenResponseSchema, type RelayScreenRequest, type RelayScreenResponse } from "@farm/shared/gen/farm/v1/replica_service_pb";
import { relayedRoute } from "../replicas/relayed-route.js";
import { watchFeed, type LiveScreenDeps } from "./live-screen-service.js";

/**
 * ReplicaService.RelayScreen, on the replica holding the agent: the
 * phone's feed here, for another replica, after checking the route and
 * the lease again. It ends with that lease (unless an admin opened it),
 * as a viewer here would.
 */
export async function* serveRelayScreen(deps: LiveScreenDeps, req: RelayScreenRequest, signal: AbortSignal): AsyncGenerator<RelayScreenResponse> {
  const serial = req.target?.serial ?? "";
  if (!serial) throw invalidArgument("target.serial", "a device serial is required");
  if (!req.requestedBy) throw invalidArgument("requested_by", "the caller is required");
  if (!req.requestedByAdmin && !req.leaseId) throw invalidArgument("lease_id", "a lease is required to watch a phone's screen");
  const { route, lease } = await relayedRoute(deps, { agentId: req.agentId, serial, physicalId: req.physicalId, leaseId: req.requestedByAdmin ? "" : req.leaseId });
  const principal = { tokenName: req.requestedBy, admin: req.requestedByAdmin };
  for await (const kind of watchFeed(deps, route, principal, principal.admin ? undefined : lease, signal)) yield create(RelayScreenResponseSchema, { event: { kind } });
}
