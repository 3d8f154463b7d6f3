import { dirname, join } from "node:path";
import { createRequire } from "node:module";

// The repo root, found from the CLI's location (cli/dist/main.js).
const repo = dirname(dirname(dirname(createRequire(import.meta.url).resolve("@farm/cli/main"))));
export const manifestSchemaDoc = join(repo, "docs", "evidence-manifest.schema.json");
