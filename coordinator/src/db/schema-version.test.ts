import { afterEach, describe, expect, it } from "vitest";
import { getTableConfig as sqliteTableConfig, SQLiteTable } from "drizzle-orm/sqlite-core";
import { getTableConfig as pgTableConfig, PgTable } from "drizzle-orm/pg-core";
import pg from "pg";
import { join } from "node:path";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as sqliteSchema from "./schema.js";
import * as pgSchema from "./pg-schema.js";
import { openDatabase, sqliteMigrationsFolder } from "./open-database.js";
import { openPostgres, pgMigrationsFolder } from "./open-postgres.js";
import { knownMigrations } from "./schema-version.js";
import { createTestDatabase } from "./testing/test-postgres.js";
import { toErrorReport } from "@farm/shared/errors";

const codeOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return toErrorReport(err);
  }
  return undefined;
};

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("the two schemas", () => {
  it("have the same tables, columns, keys and indexes in SQLite and PostgreSQL", () => {
    const shape = (name: string, columns: { name: string; notNull: boolean; primary: boolean }[], indexes: string[]) => ({
      name,
      columns: columns.map((c) => `${c.name}${c.notNull ? " not null" : ""}${c.primary ? " pk" : ""}`).sort(),
      indexes: indexes.sort(),
    });
    const lite = (Object.values(sqliteSchema) as unknown[])
      .filter((t): t is SQLiteTable => t instanceof SQLiteTable)
      .map((t) => sqliteTableConfig(t))
      .map((c) => shape(c.name, c.columns, c.indexes.map((i) => i.config.name)));
    // The summary key is a file beside a SQLite database; replicas, sharing no data dir, keep it in theirs (auth/summary-key.ts).
    const postgresOnly = new Set(["summary_key"]);
    // A session's start marks its lease, so a release on another replica sees it (pg-lease-store.ts); one SQLite process needs no mark.
    const postgresOnlyColumns = new Set(["leases.has_sessions"]);
    const post = (Object.values(pgSchema) as unknown[])
      .filter((t): t is PgTable => t instanceof PgTable)
      .map((t) => pgTableConfig(t))
      .filter((c) => !postgresOnly.has(c.name))
      .map((c) => shape(c.name, c.columns.filter((col) => !postgresOnlyColumns.has(`${c.name}.${col.name}`)), c.indexes.map((i) => i.config.name ?? "")));
    expect(post.sort((a, b) => a.name.localeCompare(b.name))).toEqual(lite.sort((a, b) => a.name.localeCompare(b.name)));
    expect(lite.length).toBeGreaterThanOrEqual(14);
  });
});

describe("a database migrated by a newer farm", () => {
  it("is refused by SQLite, naming the file, and left as it was", async () => {
    const dir = mkdtempSync(join(tmpdir(), "farm-schema-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, "coordinator.db");
    const first = openDatabase(file);
    const newest = knownMigrations(sqliteMigrationsFolder).at(-1)!.when;
    first.sqlite.prepare("INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('future', ?)").run(newest + 1000);
    first.close();
    expect(codeOf(() => openDatabase(file))).toMatchObject({ code: "DATABASE_SCHEMA_TOO_NEW", field: "database" });
    // Refused before anything was touched: the tables and the newer row are all there.
    const Database = (await import("better-sqlite3")).default;
    const raw = new Database(file, { readonly: true });
    cleanups.push(() => void raw.close());
    expect(raw.prepare("SELECT count(*) AS n FROM __drizzle_migrations WHERE hash = 'future'").get()).toEqual({ n: 1 });
    expect(raw.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'leases'").get()).toEqual({ n: 1 });
  });

  it("is refused by PostgreSQL; an older schema is migrated once even by replicas starting together", async () => {
    const created = await createTestDatabase();
    cleanups.push(() => created.drop());
    const opened = await Promise.all([openPostgres(created.url), openPostgres(created.url), openPostgres(created.url)]);
    for (const o of opened) cleanups.push(() => o.close());
    const applied = await opened[0]!.pool.query<{ n: string }>("SELECT count(*)::text AS n FROM drizzle.__drizzle_migrations");
    expect(Number(applied.rows[0]!.n)).toBe(knownMigrations(pgMigrationsFolder).length);
    const newest = knownMigrations(pgMigrationsFolder).at(-1)!.when;
    await opened[0]!.pool.query("INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES ('future', $1)", [newest + 1000]);
    const refused = await openPostgres(created.url).then(() => undefined, (err: unknown) => toErrorReport(err));
    expect(refused).toMatchObject({ code: "DATABASE_SCHEMA_TOO_NEW", field: "database" });
    const tables = await opened[0]!.pool.query("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'");
    expect(tables.rows[0].n).toBeGreaterThanOrEqual(14);
  });

  it("refuses a PostgreSQL database that needs migrations when asked not to apply them", async () => {
    const created = await createTestDatabase();
    cleanups.push(() => created.drop());
    await expect(openPostgres(created.url, { migrate: false })).rejects.toThrow(/farm coordinator migrate/);
    const client = new pg.Client({ connectionString: created.url });
    await client.connect();
    cleanups.push(() => client.end());
    const tables = await client.query("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'");
    expect(tables.rows[0].n).toBe(0);
  });
});
