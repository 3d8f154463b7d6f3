import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "./gen/farm/v1/error_pb.js";

/** One error the system can return: a stable code and the gRPC status it always travels with. */
export interface ErrorSpec {
  readonly code: string;
  readonly status: Code;
}

/**
 * Every error agent, coordinator and CLI can return. Clients branch on the
 * code, never on messages, so a code is never renamed once shipped; the
 * status is part of the entry so no hop has to guess it. Keys are the codes.
 */
export const Errors = {
  INVALID_ARGUMENT: { code: "INVALID_ARGUMENT", status: Code.InvalidArgument },
  UNAUTHENTICATED: { code: "UNAUTHENTICATED", status: Code.Unauthenticated },
  PERMISSION_DENIED: { code: "PERMISSION_DENIED", status: Code.PermissionDenied },
  NOT_FOUND: { code: "NOT_FOUND", status: Code.NotFound },
  ALREADY_EXISTS: { code: "ALREADY_EXISTS", status: Code.AlreadyExists },
  /** An HTTP method the dashboard endpoint does not serve. */
  METHOD_NOT_ALLOWED: { code: "METHOD_NOT_ALLOWED", status: Code.Unimplemented },
  NOT_IMPLEMENTED: { code: "NOT_IMPLEMENTED", status: Code.Unimplemented },
  INTERNAL: { code: "INTERNAL", status: Code.Internal },
  DEADLINE_EXCEEDED: { code: "DEADLINE_EXCEEDED", status: Code.DeadlineExceeded },
  /** A limit without a farm code of its own (a message over a method's size cap, read by Connect itself). */
  RESOURCE_EXHAUSTED: { code: "RESOURCE_EXHAUSTED", status: Code.ResourceExhausted },
  /** A request (or one of its messages) larger than the method accepts; refused before it is read. */
  MESSAGE_TOO_LARGE: { code: "MESSAGE_TOO_LARGE", status: Code.ResourceExhausted },
  /** Too many calls in flight for one caller; retry when some have ended. */
  TOO_MANY_STREAMS: { code: "TOO_MANY_STREAMS", status: Code.ResourceExhausted },
  /** A per-user cap (stored evidence bytes, ...) is reached. */
  QUOTA_EXCEEDED: { code: "QUOTA_EXCEEDED", status: Code.ResourceExhausted },
  /** A repeated request id with different content. */
  IDEMPOTENCY_CONFLICT: { code: "IDEMPOTENCY_CONFLICT", status: Code.AlreadyExists },

  // Transport and the coordinator itself.
  COORDINATOR_UNAVAILABLE: { code: "COORDINATOR_UNAVAILABLE", status: Code.Unavailable },
  COORDINATOR_SHUTTING_DOWN: { code: "COORDINATOR_SHUTTING_DOWN", status: Code.Unavailable },
  /** A token refused over cleartext to or from another machine. */
  INSECURE_TRANSPORT: { code: "INSECURE_TRANSPORT", status: Code.PermissionDenied },
  TLS_VERIFY_FAILED: { code: "TLS_VERIFY_FAILED", status: Code.Unavailable },

  // Agents.
  AGENT_ALREADY_ATTACHED: { code: "AGENT_ALREADY_ATTACHED", status: Code.AlreadyExists },
  /** An agent token presented for another agent than the one it is bound to. */
  AGENT_IDENTITY_MISMATCH: { code: "AGENT_IDENTITY_MISMATCH", status: Code.PermissionDenied },
  AGENT_VERSION_INCOMPATIBLE: { code: "AGENT_VERSION_INCOMPATIBLE", status: Code.FailedPrecondition },
  AGENT_PROTOCOL_VIOLATION: { code: "AGENT_PROTOCOL_VIOLATION", status: Code.FailedPrecondition },
  AGENT_OFFLINE: { code: "AGENT_OFFLINE", status: Code.Unavailable },
  AGENT_HEARTBEAT_MISSED: { code: "AGENT_HEARTBEAT_MISSED", status: Code.Unavailable },
  /** The agent is draining and takes no new work. */
  AGENT_DRAINING: { code: "AGENT_DRAINING", status: Code.Unavailable },
  AGENT_DATA_DIR_LOCKED: { code: "AGENT_DATA_DIR_LOCKED", status: Code.FailedPrecondition },
  /** Removing an agent that is attached. */
  AGENT_STILL_ATTACHED: { code: "AGENT_STILL_ATTACHED", status: Code.FailedPrecondition },
  /** An agent's inventory over the device count or a field's length cap. */
  INVENTORY_TOO_LARGE: { code: "INVENTORY_TOO_LARGE", status: Code.ResourceExhausted },

  // Devices and routing.
  DEVICE_OFFLINE: { code: "DEVICE_OFFLINE", status: Code.Unavailable },
  DEVICE_NOT_FOUND: { code: "DEVICE_NOT_FOUND", status: Code.NotFound },
  DEVICE_AMBIGUOUS: { code: "DEVICE_AMBIGUOUS", status: Code.FailedPrecondition },
  DEVICE_BUSY: { code: "DEVICE_BUSY", status: Code.Unavailable },
  /** A serial whose agent's claim on it (physical id or serial owned by another agent) no admin has accepted. */
  DEVICE_QUARANTINED: { code: "DEVICE_QUARANTINED", status: Code.FailedPrecondition },
  DEVICE_OWNERSHIP_UNRESOLVED: { code: "DEVICE_OWNERSHIP_UNRESOLVED", status: Code.FailedPrecondition },
  DUPLICATE_IDENTITY: { code: "DUPLICATE_IDENTITY", status: Code.FailedPrecondition },

  // Leases.
  LEASE_REQUIRED: { code: "LEASE_REQUIRED", status: Code.FailedPrecondition },
  LEASE_HELD_BY_OTHER: { code: "LEASE_HELD_BY_OTHER", status: Code.FailedPrecondition },
  LEASE_EXPIRED: { code: "LEASE_EXPIRED", status: Code.FailedPrecondition },
  LEASE_RELEASED: { code: "LEASE_RELEASED", status: Code.FailedPrecondition },
  LEASE_NOT_FOUND: { code: "LEASE_NOT_FOUND", status: Code.NotFound },
  LEASE_WAIT_CANCELLED: { code: "LEASE_WAIT_CANCELLED", status: Code.Canceled },
  LEASE_WAIT_TIMEOUT: { code: "LEASE_WAIT_TIMEOUT", status: Code.DeadlineExceeded },
  NO_DEVICE_AVAILABLE: { code: "NO_DEVICE_AVAILABLE", status: Code.ResourceExhausted },

  // Device actions: how far a dispatch got.
  ACTION_NOT_FOUND: { code: "ACTION_NOT_FOUND", status: Code.NotFound },
  COMMAND_TIMEOUT: { code: "COMMAND_TIMEOUT", status: Code.DeadlineExceeded },
  ADB_CONNECTION_LOST: { code: "ADB_CONNECTION_LOST", status: Code.Unavailable },
  ADB_REFUSED: { code: "ADB_REFUSED", status: Code.Unavailable },
  OUTPUT_TOO_LARGE: { code: "OUTPUT_TOO_LARGE", status: Code.Unavailable },
  BLOB_UNAVAILABLE: { code: "BLOB_UNAVAILABLE", status: Code.Unavailable },
  INSTALL_PUSH_FAILED: { code: "INSTALL_PUSH_FAILED", status: Code.Unavailable },
  DEVICE_JOB_START_FAILED: { code: "DEVICE_JOB_START_FAILED", status: Code.Unavailable },
  DEVICE_JOB_RECORD_MISSING: { code: "DEVICE_JOB_RECORD_MISSING", status: Code.Unavailable },
  /** The action ran on the device and failed (a known, settled outcome). */
  INSTALL_FAILED: { code: "INSTALL_FAILED", status: Code.Aborted },
  INPUT_FAILED: { code: "INPUT_FAILED", status: Code.Aborted },
  SETPROP_FAILED: { code: "SETPROP_FAILED", status: Code.Aborted },

  // Screenshots (a routed call; the same checks name artifact errors in manifests).
  SCREENSHOT_TRANSFER_FAILED: { code: "SCREENSHOT_TRANSFER_FAILED", status: Code.Unavailable },
  SCREENSHOT_EMPTY: { code: "SCREENSHOT_EMPTY", status: Code.DataLoss },
  SCREENSHOT_NOT_PNG: { code: "SCREENSHOT_NOT_PNG", status: Code.DataLoss },
  SCREENSHOT_INVALID_PNG: { code: "SCREENSHOT_INVALID_PNG", status: Code.DataLoss },
  SCREENSHOT_TOO_LARGE: { code: "SCREENSHOT_TOO_LARGE", status: Code.DataLoss },

  // App endpoints, named as the app bridge contract names them.
  bridge_endpoint_discovery_failed: { code: "bridge_endpoint_discovery_failed", status: Code.FailedPrecondition },
  bridge_endpoint_invalid: { code: "bridge_endpoint_invalid", status: Code.FailedPrecondition },
  bridge_package_mismatch: { code: "bridge_package_mismatch", status: Code.FailedPrecondition },
  bridge_not_ready: { code: "bridge_not_ready", status: Code.Unavailable },
  bridge_identity_mismatch: { code: "bridge_identity_mismatch", status: Code.FailedPrecondition },
  bridge_forward_not_owned: { code: "bridge_forward_not_owned", status: Code.FailedPrecondition },

  // Evidence.
  EVIDENCE_OUTPUT_EXISTS: { code: "EVIDENCE_OUTPUT_EXISTS", status: Code.AlreadyExists },
  EVIDENCE_CAPTURE_FAILED: { code: "EVIDENCE_CAPTURE_FAILED", status: Code.FailedPrecondition },
  EVIDENCE_NOT_FOUND: { code: "EVIDENCE_NOT_FOUND", status: Code.NotFound },
  EVIDENCE_VERIFY_FAILED: { code: "EVIDENCE_VERIFY_FAILED", status: Code.DataLoss },
  /** Bytes that did not arrive whole (or could not be stored) on some hop; a new transfer may succeed. */
  EVIDENCE_TRANSFER_FAILED: { code: "EVIDENCE_TRANSFER_FAILED", status: Code.Unavailable },
  EVIDENCE_RECORDING_ACTIVE: { code: "EVIDENCE_RECORDING_ACTIVE", status: Code.FailedPrecondition },
  EVIDENCE_SESSION_NOT_FOUND: { code: "EVIDENCE_SESSION_NOT_FOUND", status: Code.NotFound },
  EVIDENCE_RECOVERY_REQUIRED: { code: "EVIDENCE_RECOVERY_REQUIRED", status: Code.FailedPrecondition },
  EVIDENCE_TOOL_MISSING: { code: "EVIDENCE_TOOL_MISSING", status: Code.FailedPrecondition },
  /** An evidence upload for an id the coordinator did not issue to that agent for that device. */
  EVIDENCE_NOT_ISSUED: { code: "EVIDENCE_NOT_ISSUED", status: Code.PermissionDenied },
} as const satisfies Record<string, ErrorSpec>;

// Each key is its own code, so `Errors[code]` finds the entry for a code off the wire.
void (Errors satisfies { readonly [K in keyof typeof Errors]: { readonly code: K } });

/** One entry of the table. */
export type FarmErrorSpec = (typeof Errors)[keyof typeof Errors];
/** Every code the system can return. */
export type ErrorCode = FarmErrorSpec["code"];

/** The table entry for a code received from another process, if this build knows it. */
export function errorSpecOf(code: string): FarmErrorSpec | undefined {
  return Object.hasOwn(Errors, code) ? Errors[code as ErrorCode] : undefined;
}

/** Plain-data form of a failure, as the CLI prints it. */
export interface ErrorReport {
  ok: false;
  /** A newer peer may send a code this build does not know; it is passed through as is. */
  code: ErrorCode;
  message: string;
  /** The request field at fault, as a proto field path (`target.serial`). */
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

export function invalidArgument(field: string, message: string): ConnectError {
  return farmError(Errors.INVALID_ARGUMENT, message, field);
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
