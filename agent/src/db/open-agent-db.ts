import Database from "better-sqlite3";
import { drizzle, type BetterSQLite3Database } from "drizzle-orm/better-sqlite3";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import { fileURLToPath } from "node:url";
import { preparePrivateDbFile } from "@farm/shared/secure-file";
import * as schema from "./schema.js";

export type AgentDb = BetterSQLite3Database<typeof schema>;

const migrationsFolder = fileURLToPath(new URL("../../drizzle", import.meta.url));

/**
 * The agent's SQLite file. synchronous=FULL: a journal entry must be on disk
 * before the action it describes is dispatched, even across a power loss.
 */
export function openAgentDb(file: string): { db: AgentDb; sqlite: Database.Database; close(): void } {
  // 0600, and so its -wal/-shm: the journal holds command text.
  preparePrivateDbFile(file);
  const sqlite = new Database(file);
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("synchronous = FULL");
  sqlite.pragma("busy_timeout = 5000");
  const db = drizzle(sqlite, { schema });
  migrate(db, { migrationsFolder });
  return { db, sqlite, close: () => sqlite.close() };
}
