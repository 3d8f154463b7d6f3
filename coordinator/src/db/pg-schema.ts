import type { JsonValue } from "@bufbuild/protobuf";
import { sql } from "drizzle-orm";
import { pgTable, text, bigint, integer, boolean, jsonb, primaryKey, uniqueIndex, index, bigserial, customType } from "drizzle-orm/pg-core";
import type { Selector } from "../leases/selector.js";

// The PostgreSQL twin of schema.ts: the same tables, columns and indexes,
// in PostgreSQL's types. Times are epoch milliseconds (bigint read as a JS
// number: exact until the year 287396). Keep the two in step: a change to
// one is a change to both, with a migration for each (drizzle/, drizzle-pg/).

const ms = (name: string) => bigint(name, { mode: "number" });

export const tokens = pgTable("tokens", {
  name: text("name").primaryKey(),
  kind: text("kind", { enum: ["agent", "user"] }).notNull(),
  admin: boolean("admin").notNull().default(false),
  hash: text("hash").notNull().unique(),
  createdAt: ms("created_at").notNull(),
  revokedAt: ms("revoked_at"),
  role: text("role", { enum: ["viewer", "operator", "admin"] }),
  agentId: text("agent_id"),
});

export const agents = pgTable("agents", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  hostname: text("hostname").notNull(),
  agentVersion: text("agent_version").notNull(),
  protocolVersion: integer("protocol_version").notNull(),
  adbVersion: text("adb_version").notNull(),
  heartbeatIntervalMs: integer("heartbeat_interval_ms").notNull(),
  connectedAt: ms("connected_at"),
  lastHeartbeatAt: ms("last_heartbeat_at"),
});

export const devices = pgTable(
  "devices",
  {
    agentId: text("agent_id")
      .notNull()
      .references(() => agents.id, { onDelete: "cascade" }),
    serial: text("serial").notNull(),
    state: text("state").notNull(),
    properties: jsonb("properties").notNull().$type<JsonValue>(),
    updatedAt: ms("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.agentId, t.serial] })],
);

export const evidence = pgTable("evidence", {
  evidenceId: text("evidence_id").primaryKey(),
  kind: text("kind").notNull(),
  status: text("status").notNull(),
  label: text("label"),
  serial: text("serial").notNull(),
  physicalId: text("physical_id").notNull(),
  agentId: text("agent_id").notNull(),
  createdAt: ms("created_at").notNull(),
  totalBytes: ms("total_bytes").notNull(),
  manifestSha256: text("manifest_sha256").notNull(),
}, (t) => [index("evidence_created").on(t.createdAt, t.evidenceId), index("evidence_serial_created").on(t.serial, t.createdAt, t.evidenceId)]);

export const leases = pgTable("leases", {
  leaseId: text("lease_id").primaryKey(),
  tokenHash: text("token_hash").notNull().unique(),
  holder: text("holder").notNull(),
  physicalId: text("physical_id").notNull(),
  agentId: text("agent_id").notNull(),
  serial: text("serial").notNull(),
  acquiredAt: ms("acquired_at").notNull(),
  expiresAt: ms("expires_at").notNull(),
  ttlMs: ms("ttl_ms").notNull(),
  state: text("state", { enum: ["active", "released", "expired"] }).notNull(),
  endedAt: ms("ended_at"),
  // PostgreSQL only (schema.ts has no such column): set by the statement that starts a session under
  // the lease, so the release's statement sees a session started while it waited for the row
  // (kysely-session-store.ts, pg-lease-store.ts). Not part of a LeaseRow.
  hasSessions: boolean("has_sessions").notNull().default(false),
}, (t) => [
  // The database itself refuses a second active lease on one phone, whichever replica asks.
  uniqueIndex("leases_one_active").on(t.physicalId).where(sql`state = 'active'`),
]);

export const leaseWaiters = pgTable("lease_waiters", {
  ticket: text("ticket").primaryKey(),
  seq: ms("seq").notNull(),
  holder: text("holder").notNull(),
  selector: jsonb("selector").notNull().$type<Selector>(),
  enqueuedAt: ms("enqueued_at").notNull(),
  waitDeadline: ms("wait_deadline").notNull(),
  ttlMs: ms("ttl_ms").notNull(),
  replicaId: text("replica_id"),
  tokenHash: text("token_hash"),
});

/**
 * A phone's cleanup between users (farm coordinator --cleanup): "leased"
 * (the baseline its cleanup diffs against, read at grant), "cleaning" (its
 * lease ended; no lease until done), "needs-attention" (the cleanup failed;
 * no lease until an admin clears it). No row: nothing to do.
 */
export const deviceCleanup = pgTable("device_cleanup", {
  physicalId: text("physical_id").primaryKey(),
  state: text("state", { enum: ["leased", "cleaning", "needs-attention"] }).notNull(),
  leaseId: text("lease_id").notNull(),
  reason: text("reason").notNull().default(""),
  // JSON {packages, paths}, or "" when it could not be read.
  baseline: text("baseline").notNull().default(""),
  since: ms("since").notNull(),
});

export const deviceLabels = pgTable(
  "device_labels",
  {
    physicalId: text("physical_id").notNull(),
    key: text("key").notNull(),
    value: text("value").notNull(),
  },
  (t) => [primaryKey({ columns: [t.physicalId, t.key] })],
);

export const activity = pgTable("activity", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  at: ms("at").notNull(),
  caller: text("caller").notNull(),
  leaseId: text("lease_id").notNull(),
  serial: text("serial").notNull(),
  physicalId: text("physical_id").notNull(),
  agentId: text("agent_id").notNull(),
  command: text("command").notNull(),
  outcome: text("outcome").notNull(),
  durationMs: ms("duration_ms").notNull(),
  requestId: text("request_id").notNull(),
  detail: text("detail").notNull(),
}, (t) => [index("activity_serial").on(t.serial, t.id)]);

export const videoSessions = pgTable("video_sessions", {
  sessionId: text("session_id").primaryKey(),
  agentId: text("agent_id").notNull(),
  serial: text("serial").notNull(),
  physicalId: text("physical_id").notNull(),
  requestedBy: text("requested_by").notNull(),
  createdAt: ms("created_at").notNull(),
  updatedAt: ms("updated_at").notNull(),
  status: text("status").notNull(),
  code: text("code").notNull(),
  message: text("message").notNull(),
  workerAvailable: boolean("worker_available").notNull(),
  recoveryState: text("recovery_state").notNull(),
  manifestJson: text("manifest_json").notNull(),
}, (t) => [index("video_sessions_created").on(t.createdAt, t.sessionId), index("video_sessions_serial_created").on(t.serial, t.createdAt, t.sessionId)]);

export const deviceClaims = pgTable(
  "device_claims",
  {
    key: text("key").notNull(),
    agentId: text("agent_id").notNull(),
    status: text("status", { enum: ["owner", "pending", "accepted", "rejected"] }).notNull(),
    createdAt: ms("created_at").notNull(),
    decidedBy: text("decided_by"),
    decidedAt: ms("decided_at"),
  },
  (t) => [primaryKey({ columns: [t.key, t.agentId] }), uniqueIndex("device_claims_one_owner").on(t.key).where(sql`status = 'owner'`)],
);

export const evidenceGrants = pgTable("evidence_grants", {
  evidenceId: text("evidence_id").primaryKey(),
  kind: text("kind", { enum: ["still", "video"] }).notNull(),
  agentId: text("agent_id").notNull(),
  agentToken: text("agent_token").notNull(),
  serial: text("serial").notNull(),
  physicalId: text("physical_id").notNull(),
  requestedBy: text("requested_by").notNull(),
  issuedAt: ms("issued_at").notNull(),
}, (t) => [index("evidence_grants_requested_by").on(t.requestedBy)]);

export const sessions = pgTable("sessions", {
  sessionId: text("session_id").primaryKey(),
  name: text("name").notNull(),
  physicalId: text("physical_id").notNull(),
  serial: text("serial").notNull(),
  agentId: text("agent_id").notNull(),
  leaseId: text("lease_id").notNull(),
  owner: text("owner").notNull(),
  status: text("status", { enum: ["running", "passed", "failed", "lease_ended"] }).notNull(),
  createdAt: ms("created_at").notNull(),
  endedAt: ms("ended_at"),
  stepCount: integer("step_count").notNull().default(0),
  context: jsonb("context").notNull().$type<Record<string, JsonValue>>(),
  ocr: boolean("ocr").notNull(),
  failedStepCount: integer("failed_step_count").notNull().default(0),
  policyJson: text("policy_json").notNull().default(""),
  policySha256: text("policy_sha256").notNull().default(""),
  secretNames: jsonb("secret_names").notNull().default(sql`'[]'::jsonb`).$type<string[]>(),
}, (t) => [
  index("sessions_created").on(t.createdAt, t.sessionId),
  index("sessions_lease").on(t.leaseId),
  index("sessions_physical_created").on(t.physicalId, t.createdAt, t.sessionId),
]);

export const sessionSteps = pgTable("session_steps", {
  sessionId: text("session_id").notNull(),
  sequence: integer("sequence").notNull(),
  record: text("record").notNull(),
  ocr: text("ocr"),
  createdAt: ms("created_at").notNull(),
}, (t) => [primaryKey({ columns: [t.sessionId, t.sequence] })]);

export const sessionImages = pgTable("session_images", {
  sessionId: text("session_id").notNull(),
  sha256: text("sha256").notNull(),
  size: ms("size").notNull(),
  width: integer("width").notNull(),
  height: integer("height").notNull(),
  mimeType: text("mime_type").notNull().default("image/png"),
}, (t) => [primaryKey({ columns: [t.sessionId, t.sha256] })]);

export const quotaReservations = pgTable("quota_reservations", {
  id: text("id").primaryKey(),
  userName: text("user_name").notNull(),
  kind: text("kind").notNull(),
  capture: integer("capture").notNull(),
  bytes: ms("bytes").notNull(),
  expiresAt: ms("expires_at").notNull(),
}, (t) => [index("quota_reservations_user").on(t.userName, t.expiresAt)]);

export const quotaUsers = pgTable("quota_users", {
  userName: text("user_name").primaryKey(),
  // Bytes of session files kept for the user (counted as they are kept: summing them per file grew with history).
  fileBytes: ms("file_bytes").notNull().default(0),
});

export const webSessions = pgTable("web_sessions", {
  idHash: text("id_hash").primaryKey(),
  tokenName: text("token_name").notNull(),
  createdAt: ms("created_at").notNull(),
  expiresAt: ms("expires_at").notNull(),
}, (t) => [index("web_sessions_token").on(t.tokenName)]);

export const replicas = pgTable("replicas", {
  id: text("id").primaryKey(),
  url: text("url").notNull(),
  secretHash: text("secret_hash").notNull(),
  startedAt: ms("started_at").notNull(),
  heartbeatAt: ms("heartbeat_at").notNull(),
});

export const agentReplicas = pgTable("agent_replicas", {
  agentId: text("agent_id").primaryKey(),
  replicaId: text("replica_id").notNull(),
  // The agent token its stream authenticated with: evidence it is asked for is uploadable only with it.
  tokenName: text("token_name").notNull(),
  since: ms("since").notNull(),
}, (t) => [index("agent_replicas_replica").on(t.replicaId)]);

const bytea = customType<{ data: Buffer; driverData: Buffer }>({ dataType: () => "bytea" });

export const storedFiles = pgTable("stored_files", {
  key: text("key").primaryKey(),
  size: ms("size").notNull(),
  sha256: text("sha256").notNull(),
  createdAt: ms("created_at").notNull(),
});

export const storedChunks = pgTable("stored_chunks", {
  key: text("key").notNull(),
  seq: integer("seq").notNull(),
  data: bytea("data").notNull(),
}, (t) => [primaryKey({ columns: [t.key, t.seq] })]);

export const blobs = pgTable("blobs", {
  id: text("id").primaryKey(),
  owner: text("owner").notNull(),
  size: ms("size").notNull(),
  sha256: text("sha256").notNull(),
  name: text("name").notNull(),
  createdAt: ms("created_at").notNull(),
}, (t) => [index("blobs_owner").on(t.owner), index("blobs_created").on(t.createdAt)]);

/**
 * The key of the summaries shown in place of redacted values (one row, id
 * 1). Replicas share the database, not a data dir, so the key they must
 * agree on lives here; its holder can read the values themselves anyway.
 */
export const summaryKey = pgTable("summary_key", {
  id: integer("id").primaryKey(),
  key: bytea("key").notNull(),
  rotatedAt: ms("rotated_at").notNull(),
});

export const idempotencyKeys = pgTable("idempotency_keys", {
  caller: text("caller").notNull(),
  requestId: text("request_id").notNull(),
  fingerprint: text("fingerprint").notNull(),
  state: text("state").notNull(),
  owner: text("owner").notNull(),
  answer: text("answer"),
  error: text("error"),
  createdAt: ms("created_at").notNull(),
  expiresAt: ms("expires_at").notNull(),
}, (t) => [primaryKey({ columns: [t.caller, t.requestId] }), index("idempotency_keys_expiry").on(t.expiresAt)]);
