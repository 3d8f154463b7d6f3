#!/usr/bin/env node
/**
 * Writes test/support/test-durations.json from vitest JSON reports: each test
 * file's wall time in ms, which test/support/duration-sequencer.ts uses to
 * start the longest files first in a clean clone (CI), where vitest has no
 * durations of its own. Refresh it when files are added or get much slower:
 *
 *   npx vitest run --project e2e --reporter=default --reporter=json --outputFile.json=/tmp/e2e.json
 *   node scripts/test-durations.mjs /tmp/unit.json /tmp/e2e.json
 *
 * Files not in the reports keep their recorded figure; a file that no longer
 * exists is dropped. A report from another checkout (a clean clone's CI run)
 * is read by each file's path inside the repository.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/$/, "");
const out = join(root, "test/support/test-durations.json");
const reports = process.argv.slice(2);
if (reports.length === 0) {
  process.stderr.write("usage: node scripts/test-durations.mjs REPORT.json...\n");
  process.exit(64);
}
const durations = existsSync(out) ? JSON.parse(readFileSync(out, "utf8")) : {};
for (const report of reports) {
  const { testResults } = JSON.parse(readFileSync(report, "utf8"));
  for (const file of testResults) {
    const path = inRepo(file.name);
    if (path && typeof file.startTime === "number" && typeof file.endTime === "number") durations[path] = Math.round(file.endTime - file.startTime);
  }
}
/** The path inside this repository of a test file reported from any checkout: its longest tail that exists here. */
function inRepo(reported) {
  const own = relative(root, reported);
  if (!own.startsWith("..")) return own;
  const parts = reported.split("/");
  for (let i = 1; i < parts.length; i++) {
    const tail = parts.slice(i).join("/");
    if (existsSync(join(root, tail))) return tail;
  }
  return undefined;
}

const kept = Object.fromEntries(Object.entries(durations).filter(([path]) => existsSync(join(root, path))).sort(([a], [b]) => (a < b ? -1 : 1)));
writeFileSync(out, `${JSON.stringify(kept, null, 2)}\n`);
process.stderr.write(`test-durations: ${Object.keys(kept).length} files in ${relative(process.cwd(), out)}\n`);
