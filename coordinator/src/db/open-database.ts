import Database from "better-sqlite3";
import { drizzle, type BetterSQLite3Database } from "drizzle-orm/better-sqlite3";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import { fileURLToPath } from "node:url";
import { preparePrivateDbFile } from "@farm/shared/secure-file";
import * as schema from "./schema.js";
import { assertSchemaKnown, knownMigrations, pendingMigrations } from "./schema-version.js";

// As drizzle() returns it: with the better-sqlite3 handle it runs on.
export type CoordinatorDb = BetterSQLite3Database<typeof schema> & { $client: Database.Database };

export interface OpenedDatabase {
  db: CoordinatorDb;
  sqlite: Database.Database;
  close(): void;
}

// Checked-in migrations live beside the package, not in dist/.
export const sqliteMigrationsFolder = fileURLToPath(new URL("../../drizzle", import.meta.url));

/** Opens (creating if needed) the coordinator's SQLite file and migrates it; refuses one a newer farm migrated. */
export function openDatabase(file: string): OpenedDatabase {
  return openAndMigrate(file).opened;
}

/** openDatabase, also saying which migrations it applied (oldest first). */
export function openAndMigrate(file: string): { opened: OpenedDatabase; applied: string[] } {
  // 0600, and so its -wal/-shm: the database holds tokens' hashes, activity and command text.
  preparePrivateDbFile(file);
  const sqlite = new Database(file);
  try {
    // WAL: readers never block the writer; NORMAL sync is durable across
    // process crashes, which is what a coordinator restart needs.
    sqlite.pragma("journal_mode = WAL");
    sqlite.pragma("synchronous = NORMAL");
    sqlite.pragma("foreign_keys = ON");
    sqlite.pragma("busy_timeout = 5000");
    const known = knownMigrations(sqliteMigrationsFolder);
    const newest = newestApplied(sqlite);
    assertSchemaKnown(newest, known, file === ":memory:" ? "the database" : file);
    const db = drizzle(sqlite, { schema });
    migrate(db, { migrationsFolder: sqliteMigrationsFolder });
    return { opened: { db, sqlite, close: () => sqlite.close() }, applied: pendingMigrations(newest, known).map((m) => m.tag) };
  } catch (err) {
    sqlite.close();
    throw err;
  }
}

function newestApplied(sqlite: Database.Database): number | null {
  const table = sqlite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '__drizzle_migrations'").get();
  if (!table) return null;
  const row = sqlite.prepare("SELECT max(created_at) AS newest FROM __drizzle_migrations").get() as { newest: number | null };
  return row.newest === null ? null : Number(row.newest);
}
