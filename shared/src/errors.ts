import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "./gen/farm/v1/error_pb.js";
import { Errors, NOT_DISPATCHED, refusalReport, type ActionOutcome, type ErrorCode, type ErrorReport, type FarmErrorSpec } from "./error-codes.js";

// The table itself lives in error-codes.ts (no Connect or generated code), re-exported here.
export * from "./error-codes.js";

/**
 * A ConnectError carrying a farm ErrorDetail with the entry's code and
 * status. `cause` keeps the underlying failure (an errno, say) for the
 * host's own logging; it never crosses the wire.
 */
export function farmError(spec: FarmErrorSpec, message: string, field?: string, outcome?: ActionOutcome, cause?: unknown): ConnectError {
  return relayedError(spec.status, spec.code, message, field, outcome, cause);
}

/** A failed device action, carrying what is known about its effect. */
export function actionError(spec: FarmErrorSpec, message: string, outcome: ActionOutcome, field?: string): ConnectError {
  return farmError(spec, message, field, outcome);
}

/** A refusal before anything was dispatched: the caller reads it as refusalReport's envelope. */
export function refusal(spec: FarmErrorSpec, message: string, field?: string): ConnectError {
  return farmError(spec, message, field, NOT_DISPATCHED);
}

/** A bad argument: always refused before anything was dispatched. */
export function invalidArgument(field: string, message: string): ConnectError {
  return refusal(Errors.INVALID_ARGUMENT, message, field);
}

/**
 * Re-raises a failure that another process reported (code and status as
 * received): the one place a status is not taken from the table, because
 * the sender's build may know codes this one does not.
 */
export function relayedError(status: Code, code: string, message: string, field?: string, outcome?: ActionOutcome, cause?: unknown): ConnectError {
  const value = {
    code,
    field: field ?? "",
    ...(outcome
      ? {
        ambiguous: outcome.ambiguous,
        ...(outcome.dispatched === null ? {} : { dispatched: outcome.dispatched }),
        actionId: outcome.actionId ?? "",
        agentId: outcome.agentId ?? "",
      }
      : {}),
  };
  return new ConnectError(message, status, undefined, [{ desc: ErrorDetailSchema, value }], cause);
}

/** Maps any thrown value to its plain-data report. */
export function toErrorReport(err: unknown): ErrorReport {
  const ce = ConnectError.from(err);
  const detail = ce.findDetails(ErrorDetailSchema)[0];
  if (detail !== undefined && detail.code !== "") {
    const report = withField({ ok: false, code: detail.code as ErrorCode, message: ce.rawMessage }, detail.field);
    // An outcome is present for device actions: dispatched is set, or the
    // result is ambiguous (dispatched unknown).
    if (detail.dispatched === false && !detail.ambiguous && !detail.actionId) return refusalReport(detail.code as ErrorCode, ce.rawMessage, detail.field || undefined);
    if (detail.dispatched !== undefined || detail.ambiguous) {
      return {
        ...report,
        dispatched: detail.dispatched ?? null,
        ambiguous: detail.ambiguous,
        ...(detail.actionId ? { actionId: detail.actionId } : {}),
        ...(detail.agentId ? { agentId: detail.agentId } : {}),
      };
    }
    if (detail.actionId) return { ...report, actionId: detail.actionId, ...(detail.agentId ? { agentId: detail.agentId } : {}) };
    return report;
  }
  // Only an error without a farm detail (Connect's own, a transport failure) has its code guessed.
  return { ok: false, code: codeForGrpc(ce.code), message: ce.rawMessage };
}

function withField(report: ErrorReport, field: string | undefined): ErrorReport {
  return field ? { ...report, field } : report;
}

function codeForGrpc(code: Code): ErrorCode {
  switch (code) {
    case Code.Unauthenticated:
      return Errors.UNAUTHENTICATED.code;
    case Code.PermissionDenied:
      return Errors.PERMISSION_DENIED.code;
    case Code.InvalidArgument:
      return Errors.INVALID_ARGUMENT.code;
    case Code.NotFound:
      return Errors.NOT_FOUND.code;
    case Code.DeadlineExceeded:
      return Errors.DEADLINE_EXCEEDED.code;
    case Code.Unavailable:
      return Errors.COORDINATOR_UNAVAILABLE.code;
    case Code.Unimplemented:
      return Errors.NOT_IMPLEMENTED.code;
    case Code.ResourceExhausted:
      return Errors.RESOURCE_EXHAUSTED.code;
    default:
      return Errors.INTERNAL.code;
  }
}
