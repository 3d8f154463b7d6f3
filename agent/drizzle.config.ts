import { defineConfig } from "drizzle-kit";

// `npx drizzle-kit generate` (run from agent/) writes a new migration into
// drizzle/ after a schema change; migrations are checked in.
export default defineConfig({
  dialect: "sqlite",
  schema: "./src/db/schema.ts",
  out: "./drizzle",
});
