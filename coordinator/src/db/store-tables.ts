import type { Generated } from "kysely";
import type * as schema from "./schema.js";

type Row<T extends { $inferSelect: unknown }> = T["$inferSelect"];

/**
 * The tables the dialect-neutral stores use, as Kysely sees them: each row
 * type is read off schema.ts (the one definition of the columns), in the
 * camelCase names the stores use; the CamelCasePlugin of store-db.ts turns
 * them into the tables' snake_case. A column whose value reads differently
 * on the two dialects is typed as stored, both ways (SQLite keeps booleans
 * as 0/1 and JSON as text; PostgreSQL returns booleans and parsed jsonb),
 * and its store converts it (sessions: kysely-session-store.ts).
 */
export interface StoreTables {
  activity: Omit<Row<typeof schema.activity>, "id"> & { id: Generated<number> };
  blobs: Row<typeof schema.blobs>;
  deviceLabels: Row<typeof schema.deviceLabels>;
  evidence: Row<typeof schema.evidence>;
  evidenceGrants: Row<typeof schema.evidenceGrants>;
  sessions: Omit<Row<typeof schema.sessions>, "context" | "ocr" | "secretNames"> & { context: string | object; ocr: number | boolean; secretNames: string | string[] };
}
