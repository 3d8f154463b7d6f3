import Database from "better-sqlite3";
import { chmodSync } from "node:fs";
import { join } from "node:path";
import { drizzle, type BetterSQLite3Database } from "drizzle-orm/better-sqlite3";
import { sql } from "drizzle-orm";
import { index, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { actionColumns } from "./schema.js";

/**
 * The ownership journal of a host: every mutating action, written before
 * dispatch. It lives in the host-wide lock dir, next to the device locks,
 * so every agent that can take a phone's lock also sees what is unresolved
 * on it, whatever its own data dir.
 */
/**
 * The predicate of the partial index actions_open (unresolved entries). A
 * query uses that index only if its WHERE repeats this text verbatim, so
 * the index and the journal's queries share this one string.
 */
export const OPEN_STATES = "state IN ('pending', 'unknown')";

export const journalActions = sqliteTable(
  "actions",
  {
    ...actionColumns(),
    /** The agent that wrote the entry (its id). */
    agentId: text("agent_id").notNull().default(""),
    /** What the dispatch observed on the way (e.g. a reboot acknowledged), kept for proof. */
    progressJson: text("progress_json").notNull().default(""),
  },
  (t) => [
    index("actions_physical_created").on(t.physicalId, t.createdAt),
    index("actions_state").on(t.state, t.physicalId),
    index("actions_open").on(t.physicalId, t.createdAt).where(sql.raw(OPEN_STATES)),
  ],
);

const schema = { journalActions };
export type HostJournalDb = BetterSQLite3Database<typeof schema>;

/** Bumped with every change to the DDL below (PRAGMA user_version). */
const SCHEMA_VERSION = 1;

const DDL = `
CREATE TABLE IF NOT EXISTS actions (
  action_id TEXT PRIMARY KEY NOT NULL,
  physical_id TEXT NOT NULL,
  serial TEXT NOT NULL,
  agent_id TEXT NOT NULL DEFAULT '',
  kind TEXT NOT NULL,
  request_sha256 TEXT NOT NULL,
  request_json TEXT NOT NULL,
  state TEXT NOT NULL,
  dispatched INTEGER,
  ambiguous INTEGER NOT NULL DEFAULT 0,
  boot_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  deadline_at INTEGER NOT NULL,
  settled_at INTEGER,
  progress_json TEXT NOT NULL DEFAULT '',
  receipt_json TEXT NOT NULL DEFAULT '',
  settled_by TEXT NOT NULL DEFAULT '',
  abandon_reason TEXT NOT NULL DEFAULT '',
  abandoned_by TEXT NOT NULL DEFAULT '',
  error_message TEXT NOT NULL DEFAULT '',
  requested_by TEXT NOT NULL DEFAULT '',
  size INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS actions_physical_created ON actions (physical_id, created_at);
CREATE INDEX IF NOT EXISTS actions_state ON actions (state, physical_id);
`;

/**
 * Indexes added since version 1, made on every open. An index changes no
 * row, so agents of older versions sharing the journal keep using it (and
 * SQLite keeps the index up to date for them): no version bump, no lockout.
 *
 * actions_open: a device's unresolved entries, oldest first, without reading
 * its settled history (up to JOURNAL_BYTES_PER_DEVICE, thousands of rows).
 * Every action reads them under the device lock; through actions_physical_created
 * that read visited every row of the device's history.
 */
const INDEXES = `
CREATE INDEX IF NOT EXISTS actions_open ON actions (physical_id, created_at) WHERE ${OPEN_STATES};
`;

export const HOST_JOURNAL_FILE = "journal.db";

/**
 * Opens (creating) the host journal in the lock dir. WAL lets several agent
 * processes share it; synchronous=FULL makes a "pending" entry durable
 * before its action is dispatched, even across a power loss.
 */
export function openHostJournalDb(lockDir: string): { db: HostJournalDb; sqlite: Database.Database; file: string; close(): void } {
  const file = join(lockDir, HOST_JOURNAL_FILE);
  const sqlite = new Database(file);
  for (const f of [file, `${file}-wal`, `${file}-shm`]) {
    try {
      chmodSync(f, 0o600);
    } catch {
      // -wal/-shm appear with the first write; SQLite gives them the main file's mode.
    }
  }
  sqlite.pragma("busy_timeout = 5000");
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("synchronous = FULL");
  const version = Number(sqlite.pragma("user_version", { simple: true }));
  if (version > SCHEMA_VERSION) {
    sqlite.close();
    throw new Error(`the host journal ${file} has schema version ${version}; this agent knows ${SCHEMA_VERSION} (a newer farm wrote it)`);
  }
  if (version < SCHEMA_VERSION) {
    sqlite.transaction(() => {
      sqlite.exec(DDL);
      sqlite.pragma(`user_version = ${SCHEMA_VERSION}`);
    }).immediate();
  }
  sqlite.exec(INDEXES);
  return { db: drizzle(sqlite, { schema }), sqlite, file, close: () => sqlite.close() };
}
