import { Code } from "@connectrpc/connect";
import { ErrorCodes, farmError } from "@farm/shared/errors";
import type { CommandError } from "@farm/shared/gen/farm/v1/agent_service_pb";

/** Re-raises an agent's CommandError for the caller, outcome included. */
export function fromCommandError(e: CommandError): Error {
  const d = e.detail;
  return farmError(
    grpcCodeFor(d?.code ?? ""),
    d?.code || ErrorCodes.internal,
    e.message,
    d?.field || undefined,
    d && (d.dispatched !== undefined || d.ambiguous) ? { dispatched: d.dispatched ?? null, ambiguous: d.ambiguous, actionId: d.actionId, agentId: d.agentId } : undefined,
  );
}

function grpcCodeFor(code: string): Code {
  switch (code) {
    case ErrorCodes.invalidArgument:
      return Code.InvalidArgument;
    case ErrorCodes.permissionDenied:
      return Code.PermissionDenied;
    case ErrorCodes.deviceNotFound:
    case ErrorCodes.actionNotFound:
      return Code.NotFound;
    case ErrorCodes.commandTimeout:
      return Code.DeadlineExceeded;
    case ErrorCodes.deviceBusy:
    case ErrorCodes.deviceOffline:
      return Code.Unavailable;
    case ErrorCodes.notImplemented:
      return Code.Unimplemented;
    default:
      return Code.FailedPrecondition;
  }
}
