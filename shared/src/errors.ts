import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "./gen/farm/v1/error_pb.js";

/**
 * Stable error codes. Clients branch on these, never on messages, so a code
 * is never renamed once shipped.
 */
export const ErrorCodes = {
  invalidArgument: "INVALID_ARGUMENT",
  unauthenticated: "UNAUTHENTICATED",
  permissionDenied: "PERMISSION_DENIED",
  notFound: "NOT_FOUND",
  alreadyExists: "ALREADY_EXISTS",
  agentAlreadyAttached: "AGENT_ALREADY_ATTACHED",
  /** An agent token presented for another agent than the one it is bound to. */
  agentIdentityMismatch: "AGENT_IDENTITY_MISMATCH",
  agentVersionIncompatible: "AGENT_VERSION_INCOMPATIBLE",
  agentProtocolViolation: "AGENT_PROTOCOL_VIOLATION",
  coordinatorUnavailable: "COORDINATOR_UNAVAILABLE",
  deadlineExceeded: "DEADLINE_EXCEEDED",
  deviceOffline: "DEVICE_OFFLINE",
  deviceNotFound: "DEVICE_NOT_FOUND",
  deviceAmbiguous: "DEVICE_AMBIGUOUS",
  deviceBusy: "DEVICE_BUSY",
  deviceOwnershipUnresolved: "DEVICE_OWNERSHIP_UNRESOLVED",
  duplicateIdentity: "DUPLICATE_IDENTITY",
  actionNotFound: "ACTION_NOT_FOUND",
  commandTimeout: "COMMAND_TIMEOUT",
  agentOffline: "AGENT_OFFLINE",
  agentDataDirLocked: "AGENT_DATA_DIR_LOCKED",
  evidenceOutputExists: "EVIDENCE_OUTPUT_EXISTS",
  evidenceCaptureFailed: "EVIDENCE_CAPTURE_FAILED",
  evidenceNotFound: "EVIDENCE_NOT_FOUND",
  evidenceVerifyFailed: "EVIDENCE_VERIFY_FAILED",
  evidenceTransferFailed: "EVIDENCE_TRANSFER_FAILED",
  evidenceRecordingActive: "EVIDENCE_RECORDING_ACTIVE",
  evidenceSessionNotFound: "EVIDENCE_SESSION_NOT_FOUND",
  evidenceRecoveryRequired: "EVIDENCE_RECOVERY_REQUIRED",
  evidenceToolMissing: "EVIDENCE_TOOL_MISSING",
  /** An evidence file the disk could not hold (full, quota, I/O error, short write); an artifact error. */
  evidenceStorageFailed: "EVIDENCE_STORAGE_FAILED",
  /** An evidence upload for an id the coordinator did not issue to that agent for that device. */
  evidenceNotIssued: "EVIDENCE_NOT_ISSUED",
  /** A serial whose agent's claim on it (physical id or serial owned by another agent) no admin has accepted. */
  deviceQuarantined: "DEVICE_QUARANTINED",
  /** An agent's inventory over the device count or a field's length cap. */
  inventoryTooLarge: "INVENTORY_TOO_LARGE",
  /** Removing an agent that is attached. */
  agentStillAttached: "AGENT_STILL_ATTACHED",
  /** A per-user cap (stored evidence bytes, ...) is reached. */
  quotaExceeded: "QUOTA_EXCEEDED",
  /** A request (or one of its messages) larger than the method accepts; refused before it is read. */
  messageTooLarge: "MESSAGE_TOO_LARGE",
  /** Too many calls in flight for one caller; retry when some have ended. */
  tooManyStreams: "TOO_MANY_STREAMS",
  /** A limit without a farm code of its own (a message over a method's size cap, read by Connect itself). */
  resourceExhausted: "RESOURCE_EXHAUSTED",
  notImplemented: "NOT_IMPLEMENTED",
  internal: "INTERNAL",
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes] | (string & {});

/** Plain-data form of a failure, as the CLI prints it. */
export interface ErrorReport {
  ok: false;
  code: ErrorCode;
  message: string;
  field?: string;
  /** For device actions: did it reach the device (null = unknown)? */
  dispatched?: boolean | null;
  ambiguous?: boolean;
  /** The journal entry of that action, when one was written. */
  actionId?: string;
  /** The agent whose journal holds it. */
  agentId?: string;
}

/** What is known about an action that failed. */
export interface ActionOutcome {
  dispatched: boolean | null;
  ambiguous: boolean;
  /** The journal entry, when one was written before the failure. */
  actionId?: string;
  agentId?: string;
}

/** The outcome of an action refused before anything reached the device. */
export const NOT_DISPATCHED: ActionOutcome = Object.freeze({ dispatched: false, ambiguous: false });

/** A ConnectError carrying a farm ErrorDetail with the stable code. */
export function farmError(
  grpcCode: Code,
  code: ErrorCode,
  message: string,
  field?: string,
  outcome?: ActionOutcome,
): ConnectError {
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
  return new ConnectError(message, grpcCode, undefined, [{ desc: ErrorDetailSchema, value }]);
}

/** A failed device action, carrying what is known about its effect. */
export function actionError(grpcCode: Code, code: ErrorCode, message: string, outcome: ActionOutcome, field?: string): ConnectError {
  return farmError(grpcCode, code, message, field, outcome);
}

export function invalidArgument(field: string, message: string): ConnectError {
  return farmError(Code.InvalidArgument, ErrorCodes.invalidArgument, message, field);
}

/** Maps any thrown value to the report the CLI prints. */
export function toErrorReport(err: unknown): ErrorReport {
  if (err instanceof CliError) {
    return withField({ ok: false, code: err.code, message: err.message }, err.field);
  }
  const ce = ConnectError.from(err);
  const detail = ce.findDetails(ErrorDetailSchema)[0];
  if (detail !== undefined && detail.code !== "") {
    const report = withField({ ok: false, code: detail.code, message: ce.rawMessage }, detail.field);
    // An outcome is present for device actions: dispatched is set, or the
    // result is ambiguous (dispatched unknown).
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
  return { ok: false, code: codeForGrpc(ce.code), message: ce.rawMessage };
}

/** An error raised on the client side before any RPC, e.g. bad flags. */
export class CliError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = "CliError";
  }
}

function withField(report: ErrorReport, field: string | undefined): ErrorReport {
  return field ? { ...report, field } : report;
}

function codeForGrpc(code: Code): ErrorCode {
  switch (code) {
    case Code.Unauthenticated:
      return ErrorCodes.unauthenticated;
    case Code.PermissionDenied:
      return ErrorCodes.permissionDenied;
    case Code.InvalidArgument:
      return ErrorCodes.invalidArgument;
    case Code.NotFound:
      return ErrorCodes.notFound;
    case Code.DeadlineExceeded:
      return ErrorCodes.deadlineExceeded;
    case Code.Unavailable:
      return ErrorCodes.coordinatorUnavailable;
    case Code.Unimplemented:
      return ErrorCodes.notImplemented;
    case Code.ResourceExhausted:
      return ErrorCodes.resourceExhausted;
    default:
      return ErrorCodes.internal;
  }
}
