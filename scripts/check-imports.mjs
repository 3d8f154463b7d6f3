#!/usr/bin/env node
// Every workspace declares the packages it imports: what its shipped code
// imports is in `dependencies`, what only its tests and build configs import
// may be in `devDependencies`. A package that resolves only because another
// workspace (or the root) happens to install it breaks the day that one drops
// it. Shipped code never imports vitest or a test helper (`src/testing/`).
import { readFileSync, readdirSync } from "node:fs";
import { builtinModules } from "node:module";
import { join, relative } from "node:path";

const root = join(import.meta.dirname, "..");
const SKIP = new Set(["node_modules", "dist", "gen", "bundle", "drizzle", "test-artifacts"]);
const BUILTIN = new Set(builtinModules);
// import … from "x", export … from "x", import "x", import("x"): the specifier only.
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)(["'])([^"'\s./][^"'\s]*)\1/gm;

/** Test code: test files, test helpers, build and tool configs, and the whole test workspace. */
function isTestCode(workspace, file) {
  return workspace === "test" || /\.test\.ts$/.test(file) || /(^|\/)testing\//.test(file) || /(^|\/)[\w-]+\.config\.[mc]?[jt]s$/.test(file);
}

function packageOf(specifier) {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

function* sources(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(path);
    else if (/\.[mc]?[jt]s$/.test(entry.name) && !entry.name.endsWith(".d.ts")) yield path;
  }
}

const problems = [];
const { workspaces } = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
for (const workspace of workspaces) {
  const dir = join(root, workspace);
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const runtime = new Set(Object.keys(pkg.dependencies ?? {}));
  const dev = new Set([...runtime, ...Object.keys(pkg.devDependencies ?? {})]);
  for (const path of sources(dir)) {
    const file = relative(dir, path);
    const testCode = isTestCode(workspace, file);
    const text = readFileSync(path, "utf8");
    for (const [, , specifier] of text.matchAll(SPECIFIER)) {
      if (specifier.startsWith("node:") || BUILTIN.has(specifier)) continue;
      const name = packageOf(specifier);
      if (name === pkg.name) continue;
      const where = `${workspace}/${file}`;
      if (!testCode && (name === "vitest" || /(^|\/)testing\//.test(specifier))) problems.push(`${where}: shipped code imports ${specifier} (test code only)`);
      else if (!(testCode ? dev : runtime).has(name)) problems.push(`${where}: imports ${name}, not in ${workspace}/package.json ${testCode ? "dependencies or devDependencies" : "dependencies"}`);
    }
  }
}

for (const p of [...new Set(problems)]) console.error(`check-imports: ${p}`);
if (problems.length > 0) process.exit(1);
console.log(`check-imports: every workspace declares what it imports (${workspaces.join(", ")})`);
