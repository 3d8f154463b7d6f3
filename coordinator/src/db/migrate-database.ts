import { join } from "node:path";
import pg from "pg";
import { isPostgresUrl } from "./database.js";
import { openAndMigrate } from "./open-database.js";
import { migratePostgres, redactDatabaseUrl } from "./open-postgres.js";

export interface MigrationReport {
  dialect: "sqlite" | "postgres";
  /** The database, as it may be shown (no password). */
  where: string;
  /** Migrations applied now, oldest first; empty when the schema was current. */
  applied: string[];
}

/**
 * `farm coordinator migrate`: brings the database to this build's schema
 * and stops. Replicas also migrate at start (one at a time); running this
 * first lets an operator see and time the step before a rolling upgrade.
 */
export async function migrateFarmDatabase(database: string | undefined, dataDir: string): Promise<MigrationReport> {
  if (database && isPostgresUrl(database)) {
    const where = redactDatabaseUrl(database);
    const pool = new pg.Pool({ connectionString: database, max: 1, application_name: "farm-coordinator-migrate" });
    try {
      const applied = await migratePostgres(pool, where);
      return { dialect: "postgres", where, applied: applied.map((m) => m.tag) };
    } finally {
      await pool.end();
    }
  }
  const file = database || join(dataDir, "coordinator.db");
  const { opened, applied } = openAndMigrate(file);
  opened.close();
  return { dialect: "sqlite", where: file, applied };
}
