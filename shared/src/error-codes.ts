import type { Code } from "@connectrpc/connect";

/**
 * gRPC status codes (google.rpc.Code: fixed by the protocol), typed as
 * Connect's Code without loading Connect: the CLI reads this table at start-up
 * and must not pay for the RPC runtime unless it makes a call. A test checks
 * each against Connect's enum.
 */
export const Status = {
  Canceled: 1 as Code.Canceled,
  Unknown: 2 as Code.Unknown,
  InvalidArgument: 3 as Code.InvalidArgument,
  DeadlineExceeded: 4 as Code.DeadlineExceeded,
  NotFound: 5 as Code.NotFound,
  AlreadyExists: 6 as Code.AlreadyExists,
  PermissionDenied: 7 as Code.PermissionDenied,
  ResourceExhausted: 8 as Code.ResourceExhausted,
  FailedPrecondition: 9 as Code.FailedPrecondition,
  Aborted: 10 as Code.Aborted,
  OutOfRange: 11 as Code.OutOfRange,
  Unimplemented: 12 as Code.Unimplemented,
  Internal: 13 as Code.Internal,
  Unavailable: 14 as Code.Unavailable,
  DataLoss: 15 as Code.DataLoss,
  Unauthenticated: 16 as Code.Unauthenticated,
} as const;

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
  INVALID_ARGUMENT: { code: "INVALID_ARGUMENT", status: Status.InvalidArgument },
  UNAUTHENTICATED: { code: "UNAUTHENTICATED", status: Status.Unauthenticated },
  PERMISSION_DENIED: { code: "PERMISSION_DENIED", status: Status.PermissionDenied },
  NOT_FOUND: { code: "NOT_FOUND", status: Status.NotFound },
  ALREADY_EXISTS: { code: "ALREADY_EXISTS", status: Status.AlreadyExists },
  /** An HTTP method the dashboard endpoint does not serve. */
  METHOD_NOT_ALLOWED: { code: "METHOD_NOT_ALLOWED", status: Status.Unimplemented },
  NOT_IMPLEMENTED: { code: "NOT_IMPLEMENTED", status: Status.Unimplemented },
  INTERNAL: { code: "INTERNAL", status: Status.Internal },
  DEADLINE_EXCEEDED: { code: "DEADLINE_EXCEEDED", status: Status.DeadlineExceeded },
  /** A limit without a farm code of its own (a message over a method's size cap, read by Connect itself). */
  RESOURCE_EXHAUSTED: { code: "RESOURCE_EXHAUSTED", status: Status.ResourceExhausted },
  /** A request (or one of its messages) larger than the method accepts; refused before it is read. */
  MESSAGE_TOO_LARGE: { code: "MESSAGE_TOO_LARGE", status: Status.ResourceExhausted },
  /** Too many calls in flight for one caller; retry when some have ended. */
  TOO_MANY_STREAMS: { code: "TOO_MANY_STREAMS", status: Status.ResourceExhausted },
  /** A per-user cap (stored evidence bytes, ...) is reached. */
  QUOTA_EXCEEDED: { code: "QUOTA_EXCEEDED", status: Status.ResourceExhausted },
  /** A repeated request id with different content. */
  IDEMPOTENCY_CONFLICT: { code: "IDEMPOTENCY_CONFLICT", status: Status.AlreadyExists },

  // Transport and the coordinator itself.
  COORDINATOR_UNAVAILABLE: { code: "COORDINATOR_UNAVAILABLE", status: Status.Unavailable },
  COORDINATOR_SHUTTING_DOWN: { code: "COORDINATOR_SHUTTING_DOWN", status: Status.Unavailable },
  /** The coordinator's database carries migrations this build does not know: upgrade the coordinator (or restore the database). */
  DATABASE_SCHEMA_TOO_NEW: { code: "DATABASE_SCHEMA_TOO_NEW", status: Status.FailedPrecondition },
  /** The coordinator's database needs migrations this coordinator was told not to apply: run `farm coordinator migrate`. */
  DATABASE_SCHEMA_OUTDATED: { code: "DATABASE_SCHEMA_OUTDATED", status: Status.FailedPrecondition },
  /** A token refused over cleartext to or from another machine. */
  INSECURE_TRANSPORT: { code: "INSECURE_TRANSPORT", status: Status.PermissionDenied },
  TLS_VERIFY_FAILED: { code: "TLS_VERIFY_FAILED", status: Status.Unavailable },

  // Agents.
  AGENT_ALREADY_ATTACHED: { code: "AGENT_ALREADY_ATTACHED", status: Status.AlreadyExists },
  /** An agent token presented for another agent than the one it is bound to. */
  AGENT_IDENTITY_MISMATCH: { code: "AGENT_IDENTITY_MISMATCH", status: Status.PermissionDenied },
  AGENT_VERSION_INCOMPATIBLE: { code: "AGENT_VERSION_INCOMPATIBLE", status: Status.FailedPrecondition },
  AGENT_PROTOCOL_VIOLATION: { code: "AGENT_PROTOCOL_VIOLATION", status: Status.FailedPrecondition },
  AGENT_OFFLINE: { code: "AGENT_OFFLINE", status: Status.Unavailable },
  AGENT_HEARTBEAT_MISSED: { code: "AGENT_HEARTBEAT_MISSED", status: Status.Unavailable },
  /** The agent is draining and takes no new work. */
  AGENT_DRAINING: { code: "AGENT_DRAINING", status: Status.Unavailable },
  AGENT_DATA_DIR_LOCKED: { code: "AGENT_DATA_DIR_LOCKED", status: Status.FailedPrecondition },
  /** Removing an agent that is attached. */
  AGENT_STILL_ATTACHED: { code: "AGENT_STILL_ATTACHED", status: Status.FailedPrecondition },
  /** An agent's inventory over the device count or a field's length cap. */
  INVENTORY_TOO_LARGE: { code: "INVENTORY_TOO_LARGE", status: Status.ResourceExhausted },

  // Devices and routing.
  DEVICE_OFFLINE: { code: "DEVICE_OFFLINE", status: Status.Unavailable },
  DEVICE_NOT_FOUND: { code: "DEVICE_NOT_FOUND", status: Status.NotFound },
  DEVICE_AMBIGUOUS: { code: "DEVICE_AMBIGUOUS", status: Status.FailedPrecondition },
  DEVICE_BUSY: { code: "DEVICE_BUSY", status: Status.Unavailable },
  /** A serial whose agent's claim on it (physical id or serial owned by another agent) no admin has accepted. */
  DEVICE_QUARANTINED: { code: "DEVICE_QUARANTINED", status: Status.FailedPrecondition },
  DEVICE_OWNERSHIP_UNRESOLVED: { code: "DEVICE_OWNERSHIP_UNRESOLVED", status: Status.FailedPrecondition },
  DUPLICATE_IDENTITY: { code: "DUPLICATE_IDENTITY", status: Status.FailedPrecondition },

  // Leases.
  LEASE_REQUIRED: { code: "LEASE_REQUIRED", status: Status.FailedPrecondition },
  LEASE_HELD_BY_OTHER: { code: "LEASE_HELD_BY_OTHER", status: Status.FailedPrecondition },
  LEASE_EXPIRED: { code: "LEASE_EXPIRED", status: Status.FailedPrecondition },
  LEASE_RELEASED: { code: "LEASE_RELEASED", status: Status.FailedPrecondition },
  LEASE_NOT_FOUND: { code: "LEASE_NOT_FOUND", status: Status.NotFound },
  LEASE_WAIT_CANCELLED: { code: "LEASE_WAIT_CANCELLED", status: Status.Canceled },
  LEASE_WAIT_TIMEOUT: { code: "LEASE_WAIT_TIMEOUT", status: Status.DeadlineExceeded },
  NO_DEVICE_AVAILABLE: { code: "NO_DEVICE_AVAILABLE", status: Status.ResourceExhausted },

  // Remote adb tunnels.
  TUNNEL_CLOSED: { code: "TUNNEL_CLOSED", status: Status.Aborted },
  TUNNEL_NOT_FOUND: { code: "TUNNEL_NOT_FOUND", status: Status.NotFound },
  TUNNEL_LIMIT: { code: "TUNNEL_LIMIT", status: Status.ResourceExhausted },

  // Device actions: how far a dispatch got.
  ACTION_NOT_FOUND: { code: "ACTION_NOT_FOUND", status: Status.NotFound },
  COMMAND_TIMEOUT: { code: "COMMAND_TIMEOUT", status: Status.DeadlineExceeded },
  ADB_CONNECTION_LOST: { code: "ADB_CONNECTION_LOST", status: Status.Unavailable },
  ADB_REFUSED: { code: "ADB_REFUSED", status: Status.Unavailable },
  OUTPUT_TOO_LARGE: { code: "OUTPUT_TOO_LARGE", status: Status.Unavailable },
  BLOB_UNAVAILABLE: { code: "BLOB_UNAVAILABLE", status: Status.Unavailable },
  INSTALL_PUSH_FAILED: { code: "INSTALL_PUSH_FAILED", status: Status.Unavailable },
  DEVICE_JOB_START_FAILED: { code: "DEVICE_JOB_START_FAILED", status: Status.Unavailable },
  DEVICE_JOB_RECORD_MISSING: { code: "DEVICE_JOB_RECORD_MISSING", status: Status.Unavailable },
  /** The action ran on the device and failed (a known, settled outcome). */
  INSTALL_FAILED: { code: "INSTALL_FAILED", status: Status.Aborted },
  INPUT_FAILED: { code: "INPUT_FAILED", status: Status.Aborted },
  SETPROP_FAILED: { code: "SETPROP_FAILED", status: Status.Aborted },

  // Screenshots (a routed call; the same checks name artifact errors in manifests).
  SCREENSHOT_TRANSFER_FAILED: { code: "SCREENSHOT_TRANSFER_FAILED", status: Status.Unavailable },
  SCREENSHOT_EMPTY: { code: "SCREENSHOT_EMPTY", status: Status.DataLoss },
  SCREENSHOT_NOT_PNG: { code: "SCREENSHOT_NOT_PNG", status: Status.DataLoss },
  SCREENSHOT_INVALID_PNG: { code: "SCREENSHOT_INVALID_PNG", status: Status.DataLoss },
  SCREENSHOT_TOO_LARGE: { code: "SCREENSHOT_TOO_LARGE", status: Status.DataLoss },
  // `farm assert visual`: the screen differs from the baseline by more than the threshold (or in size).
  VISUAL_MISMATCH: { code: "VISUAL_MISMATCH", status: Status.FailedPrecondition },

  // App endpoints, named as the app bridge contract names them.
  bridge_endpoint_discovery_failed: { code: "bridge_endpoint_discovery_failed", status: Status.FailedPrecondition },
  bridge_endpoint_invalid: { code: "bridge_endpoint_invalid", status: Status.FailedPrecondition },
  bridge_package_mismatch: { code: "bridge_package_mismatch", status: Status.FailedPrecondition },
  bridge_not_ready: { code: "bridge_not_ready", status: Status.Unavailable },
  bridge_identity_mismatch: { code: "bridge_identity_mismatch", status: Status.FailedPrecondition },
  bridge_forward_not_owned: { code: "bridge_forward_not_owned", status: Status.FailedPrecondition },

  // Evidence.
  EVIDENCE_OUTPUT_EXISTS: { code: "EVIDENCE_OUTPUT_EXISTS", status: Status.AlreadyExists },
  EVIDENCE_CAPTURE_FAILED: { code: "EVIDENCE_CAPTURE_FAILED", status: Status.FailedPrecondition },
  EVIDENCE_NOT_FOUND: { code: "EVIDENCE_NOT_FOUND", status: Status.NotFound },
  EVIDENCE_VERIFY_FAILED: { code: "EVIDENCE_VERIFY_FAILED", status: Status.DataLoss },
  /** Bytes that did not arrive whole (or could not be stored) on some hop; a new transfer may succeed. */
  EVIDENCE_TRANSFER_FAILED: { code: "EVIDENCE_TRANSFER_FAILED", status: Status.Unavailable },
  EVIDENCE_RECORDING_ACTIVE: { code: "EVIDENCE_RECORDING_ACTIVE", status: Status.FailedPrecondition },
  EVIDENCE_SESSION_NOT_FOUND: { code: "EVIDENCE_SESSION_NOT_FOUND", status: Status.NotFound },
  EVIDENCE_RECOVERY_REQUIRED: { code: "EVIDENCE_RECOVERY_REQUIRED", status: Status.FailedPrecondition },
  EVIDENCE_TOOL_MISSING: { code: "EVIDENCE_TOOL_MISSING", status: Status.FailedPrecondition },
  /** An evidence upload for an id the coordinator did not issue to that agent for that device. */
  EVIDENCE_NOT_ISSUED: { code: "EVIDENCE_NOT_ISSUED", status: Status.PermissionDenied },
  /** No recorded session with that id. */
  SESSION_NOT_FOUND: { code: "SESSION_NOT_FOUND", status: Status.NotFound },
  /** The session has already ended (by its owner, or because its lease ended). */
  SESSION_ENDED: { code: "SESSION_ENDED", status: Status.FailedPrecondition },
  /** A call in a session (x-farm-session) on another phone, lease or owner than the session's. */
  SESSION_MISMATCH: { code: "SESSION_MISMATCH", status: Status.FailedPrecondition },
  /** The session masks secrets whose values the coordinator lost in a restart: its evidence could not be masked. */
  SESSION_SECRETS_LOST: { code: "SESSION_SECRETS_LOST", status: Status.FailedPrecondition },
  /** No element of the UI tree matches the selector. */
  ELEMENT_NOT_FOUND: { code: "ELEMENT_NOT_FOUND", status: Status.NotFound },
  /** More than one element matches the selector; the message lists candidates. */
  ELEMENT_AMBIGUOUS: { code: "ELEMENT_AMBIGUOUS", status: Status.FailedPrecondition },
  /** The UI tree could not be read (UIAutomator or the app's SDK failed, or the screen is locked). */
  UI_TREE_FAILED: { code: "UI_TREE_FAILED", status: Status.Unavailable },
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
 * The one envelope of a refusal before anything was dispatched (bad flags,
 * a conflicting request id, an app endpoint not found): every such refusal,
 * CLI- or server-side, reads the same, so a caller knows nothing happened.
 */
export function refusalReport(code: ErrorCode, message: string, field?: string): ErrorReport {
  return { ok: false, code, message, ...(field ? { field } : {}), dispatched: NOT_DISPATCHED.dispatched, ambiguous: NOT_DISPATCHED.ambiguous };
}
