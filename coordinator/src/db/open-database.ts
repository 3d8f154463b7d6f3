import Database from "better-sqlite3";
import { drizzle, type BetterSQLite3Database } from "drizzle-orm/better-sqlite3";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import { fileURLToPath } from "node:url";
import { preparePrivateDbFile } from "@farm/shared/secure-file";
import * as schema from "./schema.js";

export type CoordinatorDb = BetterSQLite3Database<typeof schema>;

export interface OpenedDatabase {
  db: CoordinatorDb;
  sqlite: Database.Database;
  close(): void;
}

// Checked-in migrations live beside the package, not in dist/.
const migrationsFolder = fileURLToPath(new URL("../../drizzle", import.meta.url));

/** Opens (creating if needed) the coordinator's SQLite file and migrates it. */
export function openDatabase(file: string): OpenedDatabase {
  // 0600, and so its -wal/-shm: the database holds tokens' hashes, activity and command text.
  preparePrivateDbFile(file);
  const sqlite = new Database(file);
  // WAL: readers never block the writer; NORMAL sync is durable across
  // process crashes, which is what a coordinator restart needs.
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("synchronous = NORMAL");
  sqlite.pragma("foreign_keys = ON");
  sqlite.pragma("busy_timeout = 5000");
  const db = drizzle(sqlite, { schema });
  migrate(db, { migrationsFolder });
  return { db, sqlite, close: () => sqlite.close() };
}
