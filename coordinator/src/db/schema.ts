import { sqliteTable, text, integer, primaryKey } from "drizzle-orm/sqlite-core";

export const tokens = sqliteTable("tokens", {
  name: text("name").primaryKey(),
  kind: text("kind", { enum: ["agent", "user"] }).notNull(),
  admin: integer("admin", { mode: "boolean" }).notNull().default(false),
  // sha256 of the secret; the secret itself is never stored.
  hash: text("hash").notNull().unique(),
  createdAt: integer("created_at").notNull(),
  revokedAt: integer("revoked_at"),
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
    // DeviceProperties as JSON: read whole, written whole.
    properties: text("properties").notNull(),
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
});
