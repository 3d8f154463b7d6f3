import { openPostgres } from "../open-postgres.js";
import { postgresDatabase, sqliteDatabase, type DatabaseDialect, type FarmDatabase } from "../database.js";
import { createTestDatabase } from "./test-postgres.js";

/** Both dialects, for `describe.each(dialects)`: storage tests run against each. */
export const dialects: readonly DatabaseDialect[] = ["sqlite", "postgres"];

/**
 * A new, empty, migrated database of the dialect: in-memory SQLite, or a
 * database of its own in the run's PostgreSQL cluster (dropped by close()).
 */
export async function openTestDatabase(dialect: DatabaseDialect): Promise<FarmDatabase> {
  if (dialect === "sqlite") return sqliteDatabase(":memory:");
  const created = await createTestDatabase();
  return postgresDatabase(await openPostgres(created.url, { poolSize: 4 }), () => created.drop());
}
