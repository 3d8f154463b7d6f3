import { create } from "@bufbuild/protobuf";
import { invalidArgument } from "@farm/shared/errors";
import { RelayLogcatResponseSchema, type RelayLogcatRequest, type RelayLogcatResponse } from "@farm/shared/gen/farm/v1/replica_service_pb";
import { relayedRoute } from "../replicas/relayed-route.js";
import { watchLogcatFeed, type LogcatServiceDeps } from "./logcat-service.js";

/**
 * ReplicaService.RelayLogcat, on the replica holding the agent: the
 * phone's logcat feed here, for another replica, after checking the route
 * and the lease again. It ends with that lease (unless an admin opened
 * it), as a reader here would.
 */
export async function* serveRelayLogcat(deps: LogcatServiceDeps, req: RelayLogcatRequest, signal: AbortSignal): AsyncGenerator<RelayLogcatResponse> {
  const serial = req.target?.serial ?? "";
  if (!serial) throw invalidArgument("target.serial", "a device serial is required");
  if (!req.requestedBy) throw invalidArgument("requested_by", "the caller is required");
  if (!req.requestedByAdmin && !req.leaseId) throw invalidArgument("lease_id", "a lease is required to read a phone's logcat");
  const { route, lease } = await relayedRoute(deps, { agentId: req.agentId, serial, physicalId: req.physicalId, leaseId: req.requestedByAdmin ? "" : req.leaseId });
  const principal = { tokenName: req.requestedBy, admin: req.requestedByAdmin };
  for await (const batch of watchLogcatFeed(deps, route, principal, principal.admin ? undefined : lease, signal)) yield create(RelayLogcatResponseSchema, batch);
}
