import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Errors, farmError } from "@farm/shared/errors";

/** A checked-in migration, as drizzle-kit's journal lists it. */
export interface KnownMigration {
  tag: string;
  /** drizzle's migration key: the time the migration was generated (ms). */
  when: number;
}

/** The migrations this build ships for one dialect, oldest first. */
export function knownMigrations(migrationsFolder: string): KnownMigration[] {
  const journal = JSON.parse(readFileSync(join(migrationsFolder, "meta", "_journal.json"), "utf8")) as { entries: KnownMigration[] };
  return journal.entries.map(({ tag, when }) => ({ tag, when }));
}

/**
 * Refuses a database that a newer coordinator has migrated: this build
 * would read and write tables whose shape it does not know. drizzle applies
 * what is newer than the newest applied migration, so that one decides.
 */
export function assertSchemaKnown(newestApplied: number | null, known: readonly KnownMigration[], where: string): void {
  const newestKnown = known.at(-1)?.when ?? 0;
  if (newestApplied !== null && newestApplied > newestKnown) {
    throw farmError(
      Errors.DATABASE_SCHEMA_TOO_NEW,
      `${where} has a schema from a newer farm (migration of ${new Date(newestApplied).toISOString()}; this build knows up to ${known.at(-1)?.tag ?? "none"}): upgrade this coordinator`,
      "database",
    );
  }
}

/** Migrations a database has not applied yet, oldest first. */
export function pendingMigrations(newestApplied: number | null, known: readonly KnownMigration[]): KnownMigration[] {
  return known.filter((m) => newestApplied === null || m.when > newestApplied);
}
