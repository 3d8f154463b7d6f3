import { ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { actionError, Errors } from "@farm/shared/errors";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { AgentCallSchema, type AgentCallResult, type StepCapture } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { AgentCaller } from "../routing/agent-session.js";
import type { ReplicaClients } from "./replica-clients.js";

/**
 * An agent whose control stream another replica holds: calls on it travel
 * to that replica (ReplicaService.CallAgent), which exchanges them with the
 * agent. Everything else about the call (access, lease, activity, session
 * step) was decided here, where the call landed.
 */
export class RemoteAgentSession extends AgentCaller {
  constructor(
    readonly agentId: string,
    readonly replicaId: string,
    tokenName: string,
    private readonly clients: ReplicaClients,
  ) {
    super(tokenName);
  }

  /** The stream is not ours to end; the replica that holds it does (it hears the agent moved or was removed). */
  terminate(): void {}

  async exchange(method: string, request: Uint8Array, by: { tokenName: string; admin: boolean }, callerDeadlineMs: number, step?: StepCapture): Promise<AgentCallResult> {
    const client = this.clients.client(this.replicaId);
    if (!client) throw actionError(Errors.AGENT_OFFLINE, `the coordinator replica holding agent ${this.agentId} is gone`, { dispatched: false, ambiguous: false });
    const call = create(AgentCallSchema, { method, requestedBy: by.tokenName, requestedByAdmin: by.admin, request, ...(step ? { step } : {}) });
    try {
      const res = await client.callAgent(
        { agentId: this.agentId, call, callerDeadlineMs: BigInt(Math.floor(callerDeadlineMs)) },
        { timeoutMs: Math.max(1, callerDeadlineMs - Date.now()) },
      );
      if (!res.result) throw actionError(Errors.AGENT_PROTOCOL_VIOLATION, "the replica holding the agent sent no result", { dispatched: null, ambiguous: true });
      return res.result;
    } catch (err) {
      const ce = ConnectError.from(err);
      // The other replica's own answer (agent offline there, a deadline it judged): it knows the outcome.
      if (ce.findDetails(ErrorDetailSchema).length > 0) throw ce;
      // The hop itself failed: the call may or may not have reached the agent.
      throw actionError(Errors.AGENT_OFFLINE, `lost the coordinator replica holding agent ${this.agentId} mid-call: ${ce.rawMessage}`, { dispatched: null, ambiguous: true });
    }
  }
}
