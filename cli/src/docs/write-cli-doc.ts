import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { cliDoc } from "./cli-doc.js";

/** Writes docs/cli.md from the command tree: `node cli/dist/docs/write-cli-doc.js`. */
export const cliDocPath = fileURLToPath(new URL("../../../docs/cli.md", import.meta.url));

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(cliDocPath, cliDoc());
  process.stdout.write(`wrote ${cliDocPath}\n`);
}
