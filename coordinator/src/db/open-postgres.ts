import { fileURLToPath } from "node:url";
import pg from "pg";
import { drizzle, type NodePgDatabase } from "drizzle-orm/node-postgres";
import { migrate } from "drizzle-orm/node-postgres/migrator";
import { Errors, farmError } from "@farm/shared/errors";
import * as schema from "./pg-schema.js";
import { assertSchemaKnown, knownMigrations, pendingMigrations, type KnownMigration } from "./schema-version.js";

export type PgCoordinatorDb = NodePgDatabase<typeof schema>;

export interface OpenedPostgres {
  db: PgCoordinatorDb;
  pool: pg.Pool;
  /** The URL without its password: for logs. */
  where: string;
  close(): Promise<void>;
}

export interface PostgresOptions {
  /** Connections this process may hold (default 10). */
  poolSize?: number;
  /** Apply pending migrations (default true); false: refuse a database that needs them. */
  migrate?: boolean;
}

export const pgMigrationsFolder = fileURLToPath(new URL("../../drizzle-pg", import.meta.url));

// One key for every farm coordinator: replicas starting together migrate one at a time.
const MIGRATION_LOCK = 0x6661726d; // "farm"

/** A database URL as it may be logged: no password. */
export function redactDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(unparsable database URL)";
  }
}

/**
 * Connects to the coordinator's PostgreSQL database and brings its schema up
 * to this build's (under an advisory lock, so replicas starting at once
 * migrate once); refuses a schema a newer farm wrote.
 */
export async function openPostgres(url: string, opts: PostgresOptions = {}): Promise<OpenedPostgres> {
  const where = redactDatabaseUrl(url);
  const pool = new pg.Pool({ connectionString: url, max: opts.poolSize ?? 10, application_name: "farm-coordinator" });
  // An idle connection the server dropped must not crash the process; the next query reconnects.
  pool.on("error", () => undefined);
  try {
    await migratePostgres(pool, where, opts.migrate ?? true);
  } catch (err) {
    await pool.end();
    throw err;
  }
  return { db: drizzle(pool, { schema }), pool, where, close: () => pool.end() };
}

/** Applies pending migrations (when `apply`), returning those applied; always checks the schema is known. */
export async function migratePostgres(pool: pg.Pool, where: string, apply = true): Promise<KnownMigration[]> {
  const known = knownMigrations(pgMigrationsFolder);
  const client = await pool.connect();
  try {
    await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK]);
    try {
      const newest = await newestApplied(client);
      assertSchemaKnown(newest, known, where);
      const pending = pendingMigrations(newest, known);
      if (pending.length > 0) {
        if (!apply) {
          throw farmError(Errors.DATABASE_SCHEMA_OUTDATED, `${where} needs ${pending.length} migration(s) (${pending.map((m) => m.tag).join(", ")}): run farm coordinator migrate`, "database");
        }
        await migrate(drizzle(client), { migrationsFolder: pgMigrationsFolder });
      }
      return pending;
    } finally {
      await client.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK]);
    }
  } finally {
    client.release();
  }
}

async function newestApplied(client: pg.PoolClient): Promise<number | null> {
  const exists = await client.query("SELECT to_regclass('drizzle.__drizzle_migrations') IS NOT NULL AS present");
  if (!exists.rows[0]?.present) return null;
  const res = await client.query<{ newest: string | null }>("SELECT max(created_at)::text AS newest FROM drizzle.__drizzle_migrations");
  const v = res.rows[0]?.newest;
  return v === null || v === undefined ? null : Number(v);
}
