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

/**
 * The CLI's exit codes, in the spirit of BSD sysexits(3), so a script can
 * tell farm's own failures from a failing test: 1 stays for what the test
 * or the app under test did (and for `farm lease run`'s child, whose own
 * code is passed through). docs/cli.md lists them (generated from here).
 */
export const Exit = {
  /** The test failed: an element missing, a visual mismatch, a wait that timed out, an app that refused to install. */
  TEST_FAILED: 1,
  /** EX_USAGE: a bad flag, argument or selector. */
  USAGE: 64,
  /** EX_DATAERR: data given or met is not acceptable (too large, a conflicting repeat, a bundle that fails verification). */
  DATA: 65,
  /** EX_NOINPUT: what was named does not exist (a device, lease, session, evidence). */
  NO_INPUT: 66,
  /** EX_UNAVAILABLE: the farm cannot serve this now: coordinator, agent or phone offline, no phone available, adb failing. */
  UNAVAILABLE: 69,
  /** EX_SOFTWARE: a fault in farm itself. */
  SOFTWARE: 70,
  /** EX_CANTCREAT: a file farm would write already exists. */
  CANT_CREATE: 73,
  /** EX_TEMPFAIL: try again later: a wait timed out, a phone busy, a limit reached for now. */
  TEMPORARY: 75,
  /** EX_PROTOCOL: the other side speaks a version this one does not. */
  PROTOCOL: 76,
  /** EX_NOPERM: no token, a token without the right, no lease or another's lease. */
  NO_PERMISSION: 77,
  /** EX_CONFIG: the configuration is wrong (TLS trust, a database schema). */
  CONFIG: 78,
} as const;

export type ExitCode = (typeof Exit)[keyof typeof Exit];

/** One error the system can return: a stable code, the gRPC status it always travels with, and the CLI's exit code for it. */
export interface ErrorSpec {
  readonly code: string;
  readonly status: Code;
  readonly exit: ExitCode;
}

/**
 * Every error agent, coordinator and CLI can return. Clients branch on the
 * code, never on messages, so a code is never renamed once shipped; the
 * status is part of the entry so no hop has to guess it. Keys are the codes.
 */
export const Errors = {
  INVALID_ARGUMENT: { code: "INVALID_ARGUMENT", status: Status.InvalidArgument, exit: Exit.USAGE },
  UNAUTHENTICATED: { code: "UNAUTHENTICATED", status: Status.Unauthenticated, exit: Exit.NO_PERMISSION },
  PERMISSION_DENIED: { code: "PERMISSION_DENIED", status: Status.PermissionDenied, exit: Exit.NO_PERMISSION },
  NOT_FOUND: { code: "NOT_FOUND", status: Status.NotFound, exit: Exit.NO_INPUT },
  ALREADY_EXISTS: { code: "ALREADY_EXISTS", status: Status.AlreadyExists, exit: Exit.DATA },
  /** An HTTP method the dashboard endpoint does not serve. */
  METHOD_NOT_ALLOWED: { code: "METHOD_NOT_ALLOWED", status: Status.Unimplemented, exit: Exit.USAGE },
  NOT_IMPLEMENTED: { code: "NOT_IMPLEMENTED", status: Status.Unimplemented, exit: Exit.UNAVAILABLE },
  INTERNAL: { code: "INTERNAL", status: Status.Internal, exit: Exit.SOFTWARE },
  DEADLINE_EXCEEDED: { code: "DEADLINE_EXCEEDED", status: Status.DeadlineExceeded, exit: Exit.TEMPORARY },
  /** The CLI was stopped (SIGINT, SIGTERM) during a call and cancelled it; the process exits 130/143, 75 otherwise. */
  CALL_CANCELLED: { code: "CALL_CANCELLED", status: Status.Canceled, exit: Exit.TEMPORARY },
  /** A limit without a farm code of its own (a message over a method's size cap, read by Connect itself). */
  RESOURCE_EXHAUSTED: { code: "RESOURCE_EXHAUSTED", status: Status.ResourceExhausted, exit: Exit.TEMPORARY },
  /** A request (or one of its messages) larger than the method accepts; refused before it is read. */
  MESSAGE_TOO_LARGE: { code: "MESSAGE_TOO_LARGE", status: Status.ResourceExhausted, exit: Exit.DATA },
  /** Too many calls in flight for one caller; retry when some have ended. */
  TOO_MANY_STREAMS: { code: "TOO_MANY_STREAMS", status: Status.ResourceExhausted, exit: Exit.TEMPORARY },
  /** A per-user cap (stored evidence bytes, ...) is reached. */
  QUOTA_EXCEEDED: { code: "QUOTA_EXCEEDED", status: Status.ResourceExhausted, exit: Exit.TEMPORARY },
  /** A repeated request id with different content. */
  IDEMPOTENCY_CONFLICT: { code: "IDEMPOTENCY_CONFLICT", status: Status.AlreadyExists, exit: Exit.DATA },
  /**
   * A repeated request id whose first call has no recorded outcome: it is still running through
   * another coordinator, or its coordinator stopped before recording it. Ambiguous; not run again.
   */
  IDEMPOTENCY_PENDING: { code: "IDEMPOTENCY_PENDING", status: Status.Unavailable, exit: Exit.TEMPORARY },

  // Transport and the coordinator itself.
  COORDINATOR_UNAVAILABLE: { code: "COORDINATOR_UNAVAILABLE", status: Status.Unavailable, exit: Exit.UNAVAILABLE },
  COORDINATOR_SHUTTING_DOWN: { code: "COORDINATOR_SHUTTING_DOWN", status: Status.Unavailable, exit: Exit.TEMPORARY },
  /** The coordinator's database carries migrations this build does not know: upgrade the coordinator (or restore the database). */
  DATABASE_SCHEMA_TOO_NEW: { code: "DATABASE_SCHEMA_TOO_NEW", status: Status.FailedPrecondition, exit: Exit.CONFIG },
  /** The coordinator's database needs migrations this coordinator was told not to apply: run `farm coordinator migrate`. */
  DATABASE_SCHEMA_OUTDATED: { code: "DATABASE_SCHEMA_OUTDATED", status: Status.FailedPrecondition, exit: Exit.CONFIG },
  /** A token refused over cleartext to or from another machine. */
  INSECURE_TRANSPORT: { code: "INSECURE_TRANSPORT", status: Status.PermissionDenied, exit: Exit.NO_PERMISSION },
  TLS_VERIFY_FAILED: { code: "TLS_VERIFY_FAILED", status: Status.Unavailable, exit: Exit.CONFIG },

  // Agents.
  AGENT_ALREADY_ATTACHED: { code: "AGENT_ALREADY_ATTACHED", status: Status.AlreadyExists, exit: Exit.TEMPORARY },
  /** An agent token presented for another agent than the one it is bound to. */
  AGENT_IDENTITY_MISMATCH: { code: "AGENT_IDENTITY_MISMATCH", status: Status.PermissionDenied, exit: Exit.NO_PERMISSION },
  AGENT_VERSION_INCOMPATIBLE: { code: "AGENT_VERSION_INCOMPATIBLE", status: Status.FailedPrecondition, exit: Exit.PROTOCOL },
  AGENT_PROTOCOL_VIOLATION: { code: "AGENT_PROTOCOL_VIOLATION", status: Status.FailedPrecondition, exit: Exit.PROTOCOL },
  AGENT_OFFLINE: { code: "AGENT_OFFLINE", status: Status.Unavailable, exit: Exit.UNAVAILABLE },
  AGENT_HEARTBEAT_MISSED: { code: "AGENT_HEARTBEAT_MISSED", status: Status.Unavailable, exit: Exit.UNAVAILABLE },
  /** The agent is draining and takes no new work. */
  AGENT_DRAINING: { code: "AGENT_DRAINING", status: Status.Unavailable, exit: Exit.TEMPORARY },
  AGENT_DATA_DIR_LOCKED: { code: "AGENT_DATA_DIR_LOCKED", status: Status.FailedPrecondition, exit: Exit.TEMPORARY },
  /** Removing an agent that is attached. */
  AGENT_STILL_ATTACHED: { code: "AGENT_STILL_ATTACHED", status: Status.FailedPrecondition, exit: Exit.TEMPORARY },
  /** An agent's inventory over the device count or a field's length cap. */
  INVENTORY_TOO_LARGE: { code: "INVENTORY_TOO_LARGE", status: Status.ResourceExhausted, exit: Exit.DATA },

  // Devices and routing.
  DEVICE_OFFLINE: { code: "DEVICE_OFFLINE", status: Status.Unavailable, exit: Exit.UNAVAILABLE },
  DEVICE_NOT_FOUND: { code: "DEVICE_NOT_FOUND", status: Status.NotFound, exit: Exit.NO_INPUT },
  DEVICE_AMBIGUOUS: { code: "DEVICE_AMBIGUOUS", status: Status.FailedPrecondition, exit: Exit.USAGE },
  DEVICE_BUSY: { code: "DEVICE_BUSY", status: Status.Unavailable, exit: Exit.TEMPORARY },
  /** A serial whose agent's claim on it (physical id or serial owned by another agent) no admin has accepted. */
  DEVICE_QUARANTINED: { code: "DEVICE_QUARANTINED", status: Status.FailedPrecondition, exit: Exit.UNAVAILABLE },
  /** Every phone that matches is marked needs-attention (its cleanup after a lease failed) until an admin clears it. */
  DEVICE_NEEDS_ATTENTION: { code: "DEVICE_NEEDS_ATTENTION", status: Status.FailedPrecondition, exit: Exit.UNAVAILABLE },
  /** A step of a phone's cleanup between users failed (activity rows of farm:cleanup); the phone is needs-attention. */
  CLEANUP_FAILED: { code: "CLEANUP_FAILED", status: Status.FailedPrecondition, exit: Exit.UNAVAILABLE },
  /** The coordinator's --cleanup policy file does not parse or validate; the field names what. */
  CLEANUP_POLICY_INVALID: { code: "CLEANUP_POLICY_INVALID", status: Status.InvalidArgument, exit: Exit.CONFIG },
  /** The agent has not read this serial's phone identity yet (listed identity-pending); try again once `farm devices` shows its physical id. */
  DEVICE_IDENTITY_PENDING: { code: "DEVICE_IDENTITY_PENDING", status: Status.FailedPrecondition, exit: Exit.TEMPORARY },
  DEVICE_OWNERSHIP_UNRESOLVED: { code: "DEVICE_OWNERSHIP_UNRESOLVED", status: Status.FailedPrecondition, exit: Exit.TEMPORARY },
  DUPLICATE_IDENTITY: { code: "DUPLICATE_IDENTITY", status: Status.FailedPrecondition, exit: Exit.UNAVAILABLE },

  // Leases.
  LEASE_REQUIRED: { code: "LEASE_REQUIRED", status: Status.FailedPrecondition, exit: Exit.NO_PERMISSION },
  LEASE_HELD_BY_OTHER: { code: "LEASE_HELD_BY_OTHER", status: Status.FailedPrecondition, exit: Exit.NO_PERMISSION },
  LEASE_EXPIRED: { code: "LEASE_EXPIRED", status: Status.FailedPrecondition, exit: Exit.NO_PERMISSION },
  LEASE_RELEASED: { code: "LEASE_RELEASED", status: Status.FailedPrecondition, exit: Exit.NO_PERMISSION },
  LEASE_NOT_FOUND: { code: "LEASE_NOT_FOUND", status: Status.NotFound, exit: Exit.NO_INPUT },
  LEASE_WAIT_CANCELLED: { code: "LEASE_WAIT_CANCELLED", status: Status.Canceled, exit: Exit.TEMPORARY },
  LEASE_WAIT_TIMEOUT: { code: "LEASE_WAIT_TIMEOUT", status: Status.DeadlineExceeded, exit: Exit.TEMPORARY },
  NO_DEVICE_AVAILABLE: { code: "NO_DEVICE_AVAILABLE", status: Status.ResourceExhausted, exit: Exit.UNAVAILABLE },
  /** No phone the farm knows (online, offline or leased) can ever match the selector: refused at once rather than waited on. */
  NO_DEVICE_MATCHES: { code: "NO_DEVICE_MATCHES", status: Status.FailedPrecondition, exit: Exit.UNAVAILABLE },

  // Remote adb tunnels.
  TUNNEL_CLOSED: { code: "TUNNEL_CLOSED", status: Status.Aborted, exit: Exit.UNAVAILABLE },
  TUNNEL_NOT_FOUND: { code: "TUNNEL_NOT_FOUND", status: Status.NotFound, exit: Exit.NO_INPUT },
  TUNNEL_LIMIT: { code: "TUNNEL_LIMIT", status: Status.ResourceExhausted, exit: Exit.TEMPORARY },

  // Device actions: how far a dispatch got.
  ACTION_NOT_FOUND: { code: "ACTION_NOT_FOUND", status: Status.NotFound, exit: Exit.NO_INPUT },
  COMMAND_TIMEOUT: { code: "COMMAND_TIMEOUT", status: Status.DeadlineExceeded, exit: Exit.TEST_FAILED },
  ADB_CONNECTION_LOST: { code: "ADB_CONNECTION_LOST", status: Status.Unavailable, exit: Exit.UNAVAILABLE },
  ADB_REFUSED: { code: "ADB_REFUSED", status: Status.Unavailable, exit: Exit.UNAVAILABLE },
  OUTPUT_TOO_LARGE: { code: "OUTPUT_TOO_LARGE", status: Status.Unavailable, exit: Exit.DATA },
  BLOB_UNAVAILABLE: { code: "BLOB_UNAVAILABLE", status: Status.Unavailable, exit: Exit.UNAVAILABLE },
  INSTALL_PUSH_FAILED: { code: "INSTALL_PUSH_FAILED", status: Status.Unavailable, exit: Exit.UNAVAILABLE },
  /** A file pushed to or pulled from a phone could not be moved whole (PushFile, PullFile). */
  FILE_TRANSFER_FAILED: { code: "FILE_TRANSFER_FAILED", status: Status.Unavailable, exit: Exit.UNAVAILABLE },
  /** A file past the push or pull limit: refused before its bytes are read. */
  FILE_TOO_LARGE: { code: "FILE_TOO_LARGE", status: Status.ResourceExhausted, exit: Exit.DATA },
  DEVICE_JOB_START_FAILED: { code: "DEVICE_JOB_START_FAILED", status: Status.Unavailable, exit: Exit.UNAVAILABLE },
  DEVICE_JOB_RECORD_MISSING: { code: "DEVICE_JOB_RECORD_MISSING", status: Status.Unavailable, exit: Exit.SOFTWARE },
  /** The action ran on the device and failed (a known, settled outcome). */
  INSTALL_FAILED: { code: "INSTALL_FAILED", status: Status.Aborted, exit: Exit.TEST_FAILED },
  INPUT_FAILED: { code: "INPUT_FAILED", status: Status.Aborted, exit: Exit.UNAVAILABLE },
  SETPROP_FAILED: { code: "SETPROP_FAILED", status: Status.Aborted, exit: Exit.UNAVAILABLE },

  // Screenshots (a routed call; the same checks name artifact errors in manifests).
  SCREENSHOT_TRANSFER_FAILED: { code: "SCREENSHOT_TRANSFER_FAILED", status: Status.Unavailable, exit: Exit.UNAVAILABLE },
  SCREENSHOT_EMPTY: { code: "SCREENSHOT_EMPTY", status: Status.DataLoss, exit: Exit.UNAVAILABLE },
  SCREENSHOT_NOT_PNG: { code: "SCREENSHOT_NOT_PNG", status: Status.DataLoss, exit: Exit.UNAVAILABLE },
  SCREENSHOT_INVALID_PNG: { code: "SCREENSHOT_INVALID_PNG", status: Status.DataLoss, exit: Exit.UNAVAILABLE },
  SCREENSHOT_TOO_LARGE: { code: "SCREENSHOT_TOO_LARGE", status: Status.DataLoss, exit: Exit.DATA },
  // `farm assert visual`: the screen differs from the baseline by more than the threshold (or in size).
  VISUAL_MISMATCH: { code: "VISUAL_MISMATCH", status: Status.FailedPrecondition, exit: Exit.TEST_FAILED },

  // App endpoints, named as the app bridge contract names them.
  bridge_endpoint_discovery_failed: { code: "bridge_endpoint_discovery_failed", status: Status.FailedPrecondition, exit: Exit.TEST_FAILED },
  bridge_endpoint_invalid: { code: "bridge_endpoint_invalid", status: Status.FailedPrecondition, exit: Exit.TEST_FAILED },
  bridge_package_mismatch: { code: "bridge_package_mismatch", status: Status.FailedPrecondition, exit: Exit.TEST_FAILED },
  bridge_not_ready: { code: "bridge_not_ready", status: Status.Unavailable, exit: Exit.TEST_FAILED },
  bridge_identity_mismatch: { code: "bridge_identity_mismatch", status: Status.FailedPrecondition, exit: Exit.TEST_FAILED },
  bridge_forward_not_owned: { code: "bridge_forward_not_owned", status: Status.FailedPrecondition, exit: Exit.NO_PERMISSION },

  // Evidence.
  EVIDENCE_OUTPUT_EXISTS: { code: "EVIDENCE_OUTPUT_EXISTS", status: Status.AlreadyExists, exit: Exit.CANT_CREATE },
  EVIDENCE_CAPTURE_FAILED: { code: "EVIDENCE_CAPTURE_FAILED", status: Status.FailedPrecondition, exit: Exit.UNAVAILABLE },
  EVIDENCE_NOT_FOUND: { code: "EVIDENCE_NOT_FOUND", status: Status.NotFound, exit: Exit.NO_INPUT },
  EVIDENCE_VERIFY_FAILED: { code: "EVIDENCE_VERIFY_FAILED", status: Status.DataLoss, exit: Exit.DATA },
  /** Bytes that did not arrive whole (or could not be stored) on some hop; a new transfer may succeed. */
  EVIDENCE_TRANSFER_FAILED: { code: "EVIDENCE_TRANSFER_FAILED", status: Status.Unavailable, exit: Exit.UNAVAILABLE },
  EVIDENCE_RECORDING_ACTIVE: { code: "EVIDENCE_RECORDING_ACTIVE", status: Status.FailedPrecondition, exit: Exit.TEMPORARY },
  EVIDENCE_SESSION_NOT_FOUND: { code: "EVIDENCE_SESSION_NOT_FOUND", status: Status.NotFound, exit: Exit.NO_INPUT },
  EVIDENCE_RECOVERY_REQUIRED: { code: "EVIDENCE_RECOVERY_REQUIRED", status: Status.FailedPrecondition, exit: Exit.UNAVAILABLE },
  EVIDENCE_TOOL_MISSING: { code: "EVIDENCE_TOOL_MISSING", status: Status.FailedPrecondition, exit: Exit.UNAVAILABLE },
  /** An evidence upload for an id the coordinator did not issue to that agent for that device. */
  EVIDENCE_NOT_ISSUED: { code: "EVIDENCE_NOT_ISSUED", status: Status.PermissionDenied, exit: Exit.NO_PERMISSION },
  /** No recorded session with that id. */
  SESSION_NOT_FOUND: { code: "SESSION_NOT_FOUND", status: Status.NotFound, exit: Exit.NO_INPUT },
  /** The session has already ended (by its owner, or because its lease ended). */
  SESSION_ENDED: { code: "SESSION_ENDED", status: Status.FailedPrecondition, exit: Exit.DATA },
  /** A call in a session (x-farm-session) on another phone, lease or owner than the session's. */
  SESSION_MISMATCH: { code: "SESSION_MISMATCH", status: Status.FailedPrecondition, exit: Exit.USAGE },
  /** The session masks secrets whose values the coordinator lost in a restart: its evidence could not be masked. */
  SESSION_SECRETS_LOST: { code: "SESSION_SECRETS_LOST", status: Status.FailedPrecondition, exit: Exit.SOFTWARE },
  /** No element of the UI tree matches the selector. */
  ELEMENT_NOT_FOUND: { code: "ELEMENT_NOT_FOUND", status: Status.NotFound, exit: Exit.TEST_FAILED },
  /** More than one element matches the selector; the message lists candidates. */
  ELEMENT_AMBIGUOUS: { code: "ELEMENT_AMBIGUOUS", status: Status.FailedPrecondition, exit: Exit.TEST_FAILED },
  /** The UI tree could not be read (UIAutomator or the app's SDK failed, or the screen is locked). */
  UI_TREE_FAILED: { code: "UI_TREE_FAILED", status: Status.Unavailable, exit: Exit.TEMPORARY },
} as const satisfies Record<string, ErrorSpec>;

// Each key is its own code, so `Errors[code]` finds the entry for a code off the wire.
void (Errors satisfies { readonly [K in keyof typeof Errors]: { readonly code: K } });

/** One entry of the table. */
export type FarmErrorSpec = (typeof Errors)[keyof typeof Errors];
/** Every code the system can return. */
export type ErrorCode = FarmErrorSpec["code"];

/** The table entry for a code received from another process, if this build knows it. */
/** The CLI's exit code for an error code; 70 (a fault in farm) for a code this build does not know. */
export function exitCodeFor(code: string): ExitCode {
  return errorSpecOf(code)?.exit ?? Exit.SOFTWARE;
}

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
