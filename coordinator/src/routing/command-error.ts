import { Code } from "@connectrpc/connect";
import { Errors, errorSpecOf, relayedError } from "@farm/shared/errors";
import type { CommandError } from "@farm/shared/gen/farm/v1/agent_service_pb";

/**
 * Re-raises an agent's CommandError for the caller, with the status the
 * agent raised it with and its outcome. An agent older than the status
 * field sends 0: the table's status for the code stands in.
 */
export function fromCommandError(e: CommandError): Error {
  const d = e.detail;
  const code = d?.code || Errors.INTERNAL.code;
  const status: Code = e.status > 0 && e.status in Code ? e.status : (errorSpecOf(code)?.status ?? Code.Unknown);
  return relayedError(
    status,
    code,
    e.message,
    d?.field || undefined,
    d && (d.dispatched !== undefined || d.ambiguous) ? { dispatched: d.dispatched ?? null, ambiguous: d.ambiguous, actionId: d.actionId, agentId: d.agentId } : undefined,
  );
}
