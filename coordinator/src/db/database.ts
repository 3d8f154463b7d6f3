import { join } from "node:path";
import type Database from "better-sqlite3";
import type pg from "pg";
import { invalidArgument } from "@farm/shared/errors";
import { openDatabase, type CoordinatorDb } from "./open-database.js";
import { openPostgres, redactDatabaseUrl, type OpenedPostgres, type PgCoordinatorDb, type PostgresOptions } from "./open-postgres.js";

/**
 * The coordinator's database, either dialect: SQLite (embedded, one
 * coordinator) or PostgreSQL (shared by replicas). Stores pick their
 * implementation by `dialect`; nothing else looks inside.
 */
export type FarmDatabase =
  | { dialect: "sqlite"; db: CoordinatorDb; sqlite: Database.Database; where: string; close(): Promise<void> }
  | { dialect: "postgres"; db: PgCoordinatorDb; pool: pg.Pool; where: string; close(): Promise<void> };

export type DatabaseDialect = FarmDatabase["dialect"];

/** Whether a --database value names PostgreSQL (a postgres:// or postgresql:// URL). */
export function isPostgresUrl(value: string): boolean {
  return /^postgres(ql)?:\/\//i.test(value);
}

/**
 * Opens what --database names: a postgres:// URL, or a SQLite file path
 * (default: <data-dir>/coordinator.db). Migrates it to this build's schema.
 */
export async function openFarmDatabase(database: string | undefined, dataDir: string, pgOptions?: PostgresOptions): Promise<FarmDatabase> {
  if (database && isPostgresUrl(database)) return postgresDatabase(await openPostgres(database, pgOptions));
  if (database && /^[a-z][a-z0-9+.-]*:\/\//i.test(database)) {
    throw invalidArgument("database", `unsupported database URL ${redactDatabaseUrl(database)}: use postgres://user@host/db, or a SQLite file path`);
  }
  return sqliteDatabase(database || join(dataDir, "coordinator.db"));
}

/** An opened PostgreSQL database as a FarmDatabase; `onClose` runs after its pool has ended. */
export function postgresDatabase(opened: OpenedPostgres, onClose?: () => Promise<void>): FarmDatabase {
  return {
    dialect: "postgres",
    db: opened.db,
    pool: opened.pool,
    where: opened.where,
    async close() {
      await opened.close();
      await onClose?.();
    },
  };
}

/**
 * A SQLite database already opened through drizzle (tests and benches that
 * open their own) as a FarmDatabase, for the stores that take one; closing
 * it stays with whoever opened it.
 */
export function sqliteDatabaseOf(db: CoordinatorDb): FarmDatabase {
  return { dialect: "sqlite", db, sqlite: db.$client, where: "(opened by the caller)", close: async () => undefined };
}

/** A SQLite file (or ":memory:") as a FarmDatabase. */
export function sqliteDatabase(file: string): FarmDatabase {
  const opened = openDatabase(file);
  return { dialect: "sqlite", db: opened.db, sqlite: opened.sqlite, where: file, close: async () => opened.close() };
}
