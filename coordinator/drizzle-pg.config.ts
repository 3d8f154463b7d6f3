import { defineConfig } from "drizzle-kit";

// PostgreSQL (replicas): `npx drizzle-kit generate --config drizzle-pg.config.ts`
// (from coordinator/) writes a migration into drizzle-pg/ after a change to
// src/db/pg-schema.ts, which mirrors src/db/schema.ts.
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/db/pg-schema.ts",
  out: "./drizzle-pg",
});
