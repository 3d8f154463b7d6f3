import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { actionError, Errors, invalidArgument } from "@farm/shared/errors";
import { CallAgentResponseSchema, ReplicaService } from "@farm/shared/gen/farm/v1/replica_service_pb";
import type { Registry } from "../registry/registry.js";
import { AttachSession } from "../routing/agent-session.js";

/** ReplicaService: what another replica asks of this one. */
export function registerReplicaService(router: ConnectRouter, deps: { registry: Registry }): void {
  router.service(ReplicaService, {
    async callAgent(req) {
      const call = req.call;
      if (!call || call.method === "") throw invalidArgument("call", "a call is required");
      const attached = deps.registry.agentSession(req.agentId);
      // Only a stream this replica holds itself: a call is never passed on a second time.
      if (!attached || !(attached.session instanceof AttachSession)) {
        throw actionError(Errors.AGENT_OFFLINE, `agent ${req.agentId} is not attached to this coordinator replica`, { dispatched: false, ambiguous: false });
      }
      const result = await attached.session.exchange(call.method, call.request, { tokenName: call.requestedBy, admin: call.requestedByAdmin }, Number(req.callerDeadlineMs), call.step);
      return create(CallAgentResponseSchema, { result });
    },
  });
}
