import type { JsonValue } from "@bufbuild/protobuf";
import { sql } from "drizzle-orm";
import { sqliteTable, text, integer, blob, primaryKey, uniqueIndex, index } from "drizzle-orm/sqlite-core";
import type { Selector } from "../leases/selector.js";

export const tokens = sqliteTable("tokens", {
  name: text("name").primaryKey(),
  kind: text("kind", { enum: ["agent", "user"] }).notNull(),
  admin: integer("admin", { mode: "boolean" }).notNull().default(false),
  // sha256 of the secret; the secret itself is never stored.
  hash: text("hash").notNull().unique(),
  createdAt: integer("created_at").notNull(),
  revokedAt: integer("revoked_at"),
  // User tokens: viewer | operator | admin (the truth; `admin` mirrors it). NULL for agent tokens.
  role: text("role", { enum: ["viewer", "operator", "admin"] }),
  // Agent tokens: the agent id bound at first attach; NULL until then.
  agentId: text("agent_id"),
});

export const agents = sqliteTable("agents", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  hostname: text("hostname").notNull(),
  agentVersion: text("agent_version").notNull(),
  protocolVersion: integer("protocol_version").notNull(),
  adbVersion: text("adb_version").notNull(),
  heartbeatIntervalMs: integer("heartbeat_interval_ms").notNull(),
  connectedAt: integer("connected_at"),
  lastHeartbeatAt: integer("last_heartbeat_at"),
});

export const devices = sqliteTable(
  "devices",
  {
    agentId: text("agent_id")
      .notNull()
      .references(() => agents.id, { onDelete: "cascade" }),
    serial: text("serial").notNull(),
    state: text("state").notNull(),
    // DeviceProperties in protobuf JSON: read whole, written whole.
    properties: text("properties", { mode: "json" }).notNull().$type<JsonValue>(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.agentId, t.serial] })],
);

/** Evidence bundles in the store; files live under <data-dir>/evidence/<id>/. */
export const evidence = sqliteTable("evidence", {
  evidenceId: text("evidence_id").primaryKey(),
  kind: text("kind").notNull(),
  status: text("status").notNull(),
  // NULL when the bundle has no label.
  label: text("label"),
  serial: text("serial").notNull(),
  physicalId: text("physical_id").notNull(),
  agentId: text("agent_id").notNull(),
  createdAt: integer("created_at").notNull(),
  totalBytes: integer("total_bytes").notNull(),
  manifestSha256: text("manifest_sha256").notNull(),
}, (t) => [
  // ListEvidence pages newest first by (created_at, evidence_id).
  index("evidence_created").on(t.createdAt, t.evidenceId),
  // One phone's page, without reading every other phone's bundles.
  index("evidence_serial_created").on(t.serial, t.createdAt, t.evidenceId),
]);

/** Leases; at most one row per physical device has state "active". */
export const leases = sqliteTable("leases", {
  leaseId: text("lease_id").primaryKey(),
  tokenHash: text("token_hash").notNull().unique(),
  holder: text("holder").notNull(),
  physicalId: text("physical_id").notNull(),
  agentId: text("agent_id").notNull(),
  serial: text("serial").notNull(),
  acquiredAt: integer("acquired_at").notNull(),
  expiresAt: integer("expires_at").notNull(),
  ttlMs: integer("ttl_ms").notNull(),
  state: text("state", { enum: ["active", "released", "expired"] }).notNull(),
  endedAt: integer("ended_at"),
}, (t) => [
  // The database itself refuses a second active lease on one phone.
  uniqueIndex("leases_one_active").on(t.physicalId).where(sql`state = 'active'`),
]);

/** Waiting acquire requests, in arrival order (seq). */
export const leaseWaiters = sqliteTable("lease_waiters", {
  ticket: text("ticket").primaryKey(),
  seq: integer("seq").notNull(),
  holder: text("holder").notNull(),
  selector: text("selector", { mode: "json" }).notNull().$type<Selector>(),
  enqueuedAt: integer("enqueued_at").notNull(),
  waitDeadline: integer("wait_deadline").notNull(),
  ttlMs: integer("ttl_ms").notNull(),
  // The coordinator replica whose caller waits on it (NULL: none now, e.g. after a restart, until the caller asks again).
  replicaId: text("replica_id"),
  // sha256 of the lease token its waiting caller will get: any replica can grant
  // the place (storing this hash on the lease); only the caller's replica knows the token.
  tokenHash: text("token_hash"),
});

/**
 * A phone's cleanup between users (farm coordinator --cleanup): "leased"
 * (the baseline its cleanup diffs against, read at grant), "cleaning" (its
 * lease ended; no lease until done), "needs-attention" (the cleanup failed;
 * no lease until an admin clears it). No row: nothing to do.
 */
export const deviceCleanup = sqliteTable("device_cleanup", {
  physicalId: text("physical_id").primaryKey(),
  state: text("state", { enum: ["leased", "cleaning", "needs-attention"] }).notNull(),
  leaseId: text("lease_id").notNull(),
  reason: text("reason").notNull().default(""),
  // JSON {packages, paths}, or "" when it could not be read.
  baseline: text("baseline").notNull().default(""),
  since: integer("since").notNull(),
});

export const deviceLabels = sqliteTable(
  "device_labels",
  {
    physicalId: text("physical_id").notNull(),
    key: text("key").notNull(),
    value: text("value").notNull(),
  },
  (t) => [primaryKey({ columns: [t.physicalId, t.key] })],
);

/** Routed actions, newest last. */
export const activity = sqliteTable("activity", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  at: integer("at").notNull(),
  caller: text("caller").notNull(),
  leaseId: text("lease_id").notNull(),
  serial: text("serial").notNull(),
  physicalId: text("physical_id").notNull(),
  agentId: text("agent_id").notNull(),
  command: text("command").notNull(),
  outcome: text("outcome").notNull(),
  durationMs: integer("duration_ms").notNull(),
  requestId: text("request_id").notNull(),
  detail: text("detail").notNull(),
}, (t) => [
  // One phone's entries, newest first, without reading everyone else's (the table only grows).
  index("activity_serial").on(t.serial, t.id),
]);

/**
 * Video sessions routed through this coordinator: which agent holds each
 * one, and the last state it reported (the worker's files are the truth).
 */
export const videoSessions = sqliteTable("video_sessions", {
  sessionId: text("session_id").primaryKey(),
  agentId: text("agent_id").notNull(),
  serial: text("serial").notNull(),
  physicalId: text("physical_id").notNull(),
  requestedBy: text("requested_by").notNull(),
  createdAt: integer("created_at").notNull(),
  updatedAt: integer("updated_at").notNull(),
  status: text("status").notNull(),
  code: text("code").notNull(),
  message: text("message").notNull(),
  workerAvailable: integer("worker_available", { mode: "boolean" }).notNull(),
  recoveryState: text("recovery_state").notNull(),
  manifestJson: text("manifest_json").notNull(),
}, (t) => [
  // ListVideoSessions pages newest first by (created_at, session_id).
  index("video_sessions_created").on(t.createdAt, t.sessionId),
  // One phone's page, without reading every other phone's recordings.
  index("video_sessions_serial_created").on(t.serial, t.createdAt, t.sessionId),
]);

/**
 * Which agent may report a phone (by physical id) or an adb serial: the
 * first agent to report a key owns it; a later one's claim is pending
 * (its serial quarantined) until an admin accepts or rejects it.
 */
export const deviceClaims = sqliteTable(
  "device_claims",
  {
    // "physical:<physical id>" or "serial:<adb serial>"
    key: text("key").notNull(),
    agentId: text("agent_id").notNull(),
    // owner | pending | accepted | rejected
    status: text("status", { enum: ["owner", "pending", "accepted", "rejected"] }).notNull(),
    createdAt: integer("created_at").notNull(),
    decidedBy: text("decided_by"),
    decidedAt: integer("decided_at"),
  },
  (t) => [
    primaryKey({ columns: [t.key, t.agentId] }),
    // One first reporter per key, whichever replica stored it.
    uniqueIndex("device_claims_one_owner").on(t.key).where(sql`status = 'owner'`),
  ],
);

/**
 * Evidence ids (and video session ids) the coordinator issued: the only
 * agent (and its token) that may upload each one, for which device, and
 * the user it counts against.
 */
export const evidenceGrants = sqliteTable("evidence_grants", {
  evidenceId: text("evidence_id").primaryKey(),
  kind: text("kind", { enum: ["still", "video"] }).notNull(),
  agentId: text("agent_id").notNull(),
  agentToken: text("agent_token").notNull(),
  serial: text("serial").notNull(),
  physicalId: text("physical_id").notNull(),
  requestedBy: text("requested_by").notNull(),
  issuedAt: integer("issued_at").notNull(),
}, (t) => [
  // Quota checks sum a user's stored bundles.
  index("evidence_grants_requested_by").on(t.requestedBy),
]);

/**
 * Recorded sessions: one user's run on one phone, bound to the lease it was
 * started under. At most one row per lease is running (a lease's end ends it).
 */
export const sessions = sqliteTable("sessions", {
  sessionId: text("session_id").primaryKey(),
  name: text("name").notNull(),
  physicalId: text("physical_id").notNull(),
  serial: text("serial").notNull(),
  agentId: text("agent_id").notNull(),
  leaseId: text("lease_id").notNull(),
  owner: text("owner").notNull(),
  status: text("status", { enum: ["running", "passed", "failed", "lease_ended"] }).notNull(),
  createdAt: integer("created_at").notNull(),
  endedAt: integer("ended_at"),
  stepCount: integer("step_count").notNull().default(0),
  // The caller's JSON object, read and written whole.
  context: text("context", { mode: "json" }).notNull().$type<Record<string, JsonValue>>(),
  ocr: integer("ocr", { mode: "boolean" }).notNull(),
  failedStepCount: integer("failed_step_count").notNull().default(0),
  // The validated capture policy as JSON ("" without one) and its sha256.
  policyJson: text("policy_json").notNull().default(""),
  policySha256: text("policy_sha256").notNull().default(""),
  // Names of the session's secrets; their values are never stored.
  secretNames: text("secret_names", { mode: "json" }).notNull().default(sql`'[]'`).$type<string[]>(),
}, (t) => [
  // ListSessions pages newest first by (created_at, session_id).
  index("sessions_created").on(t.createdAt, t.sessionId),
  // A lease's end looks up its running sessions.
  index("sessions_lease").on(t.leaseId),
  // One phone's page, without reading every other phone's sessions.
  index("sessions_physical_created").on(t.physicalId, t.createdAt, t.sessionId),
]);

// One step of a session's timeline. The record is versioned JSON read by
// step-record.ts (version 1: the earlier single-screenshot shape); OCR
// arrives later and is kept beside it, never inside it.
export const sessionSteps = sqliteTable("session_steps", {
  sessionId: text("session_id").notNull(),
  sequence: integer("sequence").notNull(),
  record: text("record").notNull(),
  ocr: text("ocr"),
  createdAt: integer("created_at").notNull(),
}, (t) => [primaryKey({ columns: [t.sessionId, t.sequence] })]);

// Which stored files (content-addressed by sha256: screenshots, logs,
// diagnoses) a session shows: what a reader of that session may fetch.
export const sessionImages = sqliteTable("session_images", {
  sessionId: text("session_id").notNull(),
  sha256: text("sha256").notNull(),
  size: integer("size").notNull(),
  width: integer("width").notNull(),
  height: integer("height").notNull(),
  mimeType: text("mime_type").notNull().default("image/png"),
}, (t) => [primaryKey({ columns: [t.sessionId, t.sha256] })]);

/**
 * Bytes held against a user's evidence quota for what is not stored yet:
 * a capture or recording in flight (its bundle's maximum size; `capture` 1,
 * counted against --captures-per-user) or session files being kept. A row
 * is deleted when what it holds for settles; one left by a crash stops
 * counting at `expires_at`.
 */
export const quotaReservations = sqliteTable("quota_reservations", {
  id: text("id").primaryKey(),
  userName: text("user_name").notNull(),
  kind: text("kind").notNull(),
  capture: integer("capture").notNull(),
  bytes: integer("bytes").notNull(),
  expiresAt: integer("expires_at").notNull(),
}, (t) => [index("quota_reservations_user").on(t.userName, t.expiresAt)]);

/**
 * One row per user with reservations, locked while one of theirs is
 * decided (so replicas decide one at a time), with the bytes of the
 * session files kept for them.
 */
export const quotaUsers = sqliteTable("quota_users", {
  userName: text("user_name").primaryKey(),
  // Bytes of session files kept for the user (counted as they are kept: summing them per file grew with history).
  fileBytes: integer("file_bytes").notNull().default(0),
});

/**
 * Dashboard sign-ins, shared by every coordinator of the farm. Only a
 * sha256 of the session id is stored (the cookie is the secret), never the
 * user's token: each use re-checks the token by name.
 */
export const webSessions = sqliteTable("web_sessions", {
  idHash: text("id_hash").primaryKey(),
  tokenName: text("token_name").notNull(),
  createdAt: integer("created_at").notNull(),
  expiresAt: integer("expires_at").notNull(),
}, (t) => [
  // A user's sessions: the per-user cap, and revocation.
  index("web_sessions_token").on(t.tokenName),
]);

/**
 * The coordinator replicas sharing this database (PostgreSQL; a SQLite
 * coordinator is alone and lists only itself): where each answers other
 * replicas, a sha256 of the secret it proves itself with, and its last
 * heartbeat. A replica whose heartbeat is stale is gone.
 */
export const replicas = sqliteTable("replicas", {
  id: text("id").primaryKey(),
  url: text("url").notNull(),
  secretHash: text("secret_hash").notNull(),
  startedAt: integer("started_at").notNull(),
  heartbeatAt: integer("heartbeat_at").notNull(),
});

/** Which replica holds each attached agent's control stream (no row: not attached anywhere). */
export const agentReplicas = sqliteTable("agent_replicas", {
  agentId: text("agent_id").primaryKey(),
  replicaId: text("replica_id").notNull(),
  // The agent token its stream authenticated with: evidence it is asked for is uploadable only with it.
  tokenName: text("token_name").notNull(),
  since: integer("since").notNull(),
}, (t) => [index("agent_replicas_replica").on(t.replicaId)]);

/**
 * Files kept in the database (`--byte-store database`): evidence bundles,
 * session images and blobs, so that every replica serves every file. A
 * file's row is written after all its chunks, in one transaction: a listed
 * file is whole.
 */
export const storedFiles = sqliteTable("stored_files", {
  key: text("key").primaryKey(),
  size: integer("size").notNull(),
  sha256: text("sha256").notNull(),
  createdAt: integer("created_at").notNull(),
});

/** A stored file's bytes, in chunks of at most 1 MiB, in order. */
export const storedChunks = sqliteTable("stored_chunks", {
  key: text("key").notNull(),
  seq: integer("seq").notNull(),
  data: blob("data", { mode: "buffer" }).notNull(),
}, (t) => [primaryKey({ columns: [t.key, t.seq] })]);

/**
 * Short-lived uploads between callers and agents (an APK to install, a
 * pulled file): who may take each and what it was checked to be. Shared,
 * so a blob uploaded through one replica can be used through another.
 */
export const blobs = sqliteTable("blobs", {
  id: text("id").primaryKey(),
  owner: text("owner").notNull(),
  size: integer("size").notNull(),
  sha256: text("sha256").notNull(),
  name: text("name").notNull(),
  createdAt: integer("created_at").notNull(),
}, (t) => [index("blobs_owner").on(t.owner), index("blobs_created").on(t.createdAt)]);

/**
 * `--request-id` keys (routing/idempotency-store.ts): the first call's
 * outcome per caller and request id, shared by every coordinator on the
 * database and kept across restarts until `expires_at`.
 */
export const idempotencyKeys = sqliteTable("idempotency_keys", {
  caller: text("caller").notNull(),
  requestId: text("request_id").notNull(),
  // sha256 of the method and its canonical arguments (the request id left out).
  fingerprint: text("fingerprint").notNull(),
  // pending | done
  state: text("state").notNull(),
  // The coordinator process that runs the first call: a pending row of another one is not waited for here.
  owner: text("owner").notNull(),
  // Done: the answer, protobuf-encoded in base64, or the error envelope in JSON; NULL while pending.
  answer: text("answer"),
  error: text("error"),
  createdAt: integer("created_at").notNull(),
  expiresAt: integer("expires_at").notNull(),
}, (t) => [primaryKey({ columns: [t.caller, t.requestId] }), index("idempotency_keys_expiry").on(t.expiresAt)]);
