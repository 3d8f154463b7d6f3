#!/usr/bin/env node
// The CPU table of a test run made with FARM_TEST_CPU_LOG=FILE (test/support/cpu-per-file.ts):
// per test file, the CPU seconds of its vitest fork and of the processes it started, heaviest
// first, and the sums per tier.
//
//   node scripts/test-cpu.mjs FILE [ROWS]   (ROWS: how many files to list, default 25)
import { readFileSync } from "node:fs";

const [file, rowsArg] = process.argv.slice(2);
if (!file) {
  console.error("usage: node scripts/test-cpu.mjs FILE [ROWS]");
  process.exit(2);
}
const rows = readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
const tier = (f) => (/^test\/(e2e|faults|deploy)\//.test(f) ? "e2e" : "unit");
const s = (ms) => (ms / 1000).toFixed(1);
rows.sort((a, b) => b.ownMs + b.childrenMs - (a.ownMs + a.childrenMs));
const pids = new Set(rows.map((r) => r.pid));
if (pids.size < rows.length) console.log(`note: ${rows.length - pids.size} files shared a fork with another; their own CPU includes the earlier file's`);
console.log("| File | Tier | CPU s | fork s | its processes s | wall s |");
console.log("| --- | --- | ---: | ---: | ---: | ---: |");
for (const r of rows.slice(0, Number(rowsArg ?? 25))) {
  console.log(`| ${r.file} | ${tier(r.file)} | ${s(r.ownMs + r.childrenMs)} | ${s(r.ownMs)} | ${s(r.childrenMs)} | ${s(r.wallMs)} |`);
}
for (const t of ["unit", "e2e"]) {
  const of = rows.filter((r) => tier(r.file) === t);
  const own = of.reduce((n, r) => n + r.ownMs, 0);
  const kids = of.reduce((n, r) => n + r.childrenMs, 0);
  console.log(`${t}: ${of.length} files, ${s(own + kids)} CPU s (forks ${s(own)}, their processes ${s(kids)})`);
}
