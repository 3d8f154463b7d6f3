import type { Generated } from "kysely";
import type * as schema from "./schema.js";

type Row<T extends { $inferSelect: unknown }> = T["$inferSelect"];

/**
 * The tables the dialect-neutral stores use, as Kysely sees them: each row
 * type is read off schema.ts (the one definition of the columns), in the
 * camelCase names the stores use; the CamelCasePlugin of store-db.ts turns
 * them into the tables' snake_case. Only columns whose values read the same
 * on both dialects belong here (text and integers); booleans and JSON do
 * not yet (SQLite stores 0/1 and text), so their tables are not listed.
 */
export interface StoreTables {
  activity: Omit<Row<typeof schema.activity>, "id"> & { id: Generated<number> };
  blobs: Row<typeof schema.blobs>;
  deviceLabels: Row<typeof schema.deviceLabels>;
  evidence: Row<typeof schema.evidence>;
  evidenceGrants: Row<typeof schema.evidenceGrants>;
}
