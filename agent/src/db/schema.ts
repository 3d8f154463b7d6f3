import { sqliteTable, text, integer, index } from "drizzle-orm/sqlite-core";

/**
 * The columns of an ownership journal entry, shared by the host journal
 * (host-journal-db.ts) and the per-agent table older versions kept here.
 * A function: drizzle binds column builders to one table each.
 */
export function actionColumns() {
  return {
    actionId: text("action_id").primaryKey(),
    physicalId: text("physical_id").notNull(),
    serial: text("serial").notNull(),
    kind: text("kind").notNull(),
    requestSha256: text("request_sha256").notNull(),
    requestJson: text("request_json").notNull(),
    // pending | settled | not_dispatched | unknown | abandoned
    state: text("state").notNull(),
    // 1, 0, or NULL for unknown.
    dispatched: integer("dispatched"),
    ambiguous: integer("ambiguous", { mode: "boolean" }).notNull().default(false),
    bootId: text("boot_id").notNull(),
    createdAt: integer("created_at").notNull(),
    deadlineAt: integer("deadline_at").notNull(),
    settledAt: integer("settled_at"),
    receiptJson: text("receipt_json").notNull().default(""),
    settledBy: text("settled_by").notNull().default(""),
    abandonReason: text("abandon_reason").notNull().default(""),
    abandonedBy: text("abandoned_by").notNull().default(""),
    errorMessage: text("error_message").notNull().default(""),
    requestedBy: text("requested_by").notNull().default(""),
    // Approximate bytes this record takes, for the per-device bound.
    size: integer("size").notNull(),
  };
}

/**
 * The journal older agents kept in their data dir; now only read once at
 * start, to move its entries into the host journal.
 */
export const actions = sqliteTable("actions", actionColumns(), (t) => [index("actions_physical_created").on(t.physicalId, t.createdAt), index("actions_state").on(t.state)]);

/** Operator pins that tell duplicate-identity phones apart, by adb serial. */
export const pins = sqliteTable("pins", {
  serial: text("serial").primaryKey(),
  label: text("label").notNull(),
  createdAt: integer("created_at").notNull(),
});

/** Last boot id seen per physical device, to notice reboots across restarts. */
export const bootIds = sqliteTable("boot_ids", {
  physicalId: text("physical_id").primaryKey(),
  bootId: text("boot_id").notNull(),
  seenAt: integer("seen_at").notNull(),
});

/** Device history: reboots, duplicate identities, abandoned actions. */
export const deviceEvents = sqliteTable(
  "device_events",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    physicalId: text("physical_id").notNull(),
    serial: text("serial").notNull(),
    kind: text("kind").notNull(),
    detail: text("detail").notNull(),
    at: integer("at").notNull(),
  },
  (t) => [index("device_events_physical").on(t.physicalId, t.at)],
);
