#!/usr/bin/env node
/**
 * Packs the client library (@farm/client) as an installable npm tarball:
 *
 *   client/bundle/package/
 *     package.json          name @farm/client, its runtime dependencies pinned as installed here
 *     lib/index.js          the library (client/dist) with the workspace code it uses (@farm/shared) bundled in, ESM
 *     types/client/*.d.ts   its declarations, and the @farm/shared declarations they name
 *     types/shared/*.d.ts   (rewritten to relative paths: the tarball needs no workspace)
 *   client/bundle/farm-client-<version>.tgz   (npm pack of the above)
 *
 *   node scripts/pack-client.mjs [--out DIR] [--no-tarball] [--quiet]
 *
 * Reads the compiled code (run `npx tsc -b` first; `make pack` does). Every
 * package the bundle leaves for run time must be one of the library's own
 * dependencies (client/package.json), or the build fails.
 */
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import * as esbuild from "esbuild";

const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/$/, "");
const { values: opts } = parseArgs({ options: { out: { type: "string" }, "no-tarball": { type: "boolean", default: false }, quiet: { type: "boolean", default: false } } });
const bundleDir = resolve(opts.out ?? join(root, "client/bundle"));
const outDir = join(bundleDir, "package");
const log = (s) => opts.quiet || process.stderr.write(`${s}\n`);
const fail = (msg) => {
  process.stderr.write(`pack-client: ${msg}\n`);
  process.exit(1);
};

const clientPkg = JSON.parse(readFileSync(join(root, "client/package.json"), "utf8"));
/** What stays a package at run time: the library's dependencies that are not workspaces. */
const RUNTIME = Object.keys(clientPkg.dependencies).filter((name) => !name.startsWith("@farm/"));
const WORKSPACE_DIST = { "@farm/client": join(root, "client/dist"), "@farm/shared": join(root, "shared/dist") };

const installedVersion = (name) => JSON.parse(readFileSync(join(root, "node_modules", name, "package.json"), "utf8")).version;
const packageOf = (spec) => (spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]);

async function bundle() {
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [join(root, "client/dist/index.js")],
    outfile: join(outDir, "lib/index.js"),
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    // Packages stay packages (the dependencies below); only the workspaces' own code is bundled in.
    plugins: [{
      name: "externals",
      setup(build) {
        build.onResolve({ filter: /^[^./]/ }, (args) => (args.path.startsWith("@farm/") || args.path.startsWith("node:") ? undefined : { path: args.path, external: true }));
      },
    }],
    metafile: true,
    logLevel: "warning",
  });
  const left = new Set();
  for (const out of Object.values(result.metafile.outputs)) for (const imp of out.imports) if (imp.external && !imp.path.startsWith("node:")) left.add(packageOf(imp.path));
  const undeclared = [...left].filter((p) => !RUNTIME.includes(p));
  if (undeclared.length) fail(`the bundle imports ${undeclared.join(", ")} at run time: add it to client/package.json dependencies`);
  const text = readFileSync(join(outDir, "lib/index.js"), "utf8");
  if (/import\.meta\.(url|dirname|filename)/.test(text)) fail("the bundle locates a file at run time (import.meta): the library must not");
}

/**
 * The declarations the public API names: from client/dist/index.d.ts,
 * every relative and @farm/shared import followed, copied under types/,
 * each @farm/* specifier rewritten to the copied file's relative path.
 */
function copyTypes() {
  const typesDir = join(outDir, "types");
  const destOf = (file) => {
    for (const [name, dist] of Object.entries(WORKSPACE_DIST)) {
      if (file.startsWith(`${dist}/`)) return join(typesDir, name.slice("@farm/".length), relative(dist, file));
    }
    fail(`${file} is outside the workspaces' dist`);
  };
  const SPEC = /(\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)(["'])([^"']+)\2/gm;
  const queue = [join(root, "client/dist/index.d.ts")];
  const seen = new Set();
  while (queue.length) {
    const file = queue.pop();
    if (seen.has(file)) continue;
    seen.add(file);
    if (!existsSync(file)) fail(`${relative(root, file)} is missing: run \`npx tsc -b\` first`);
    const text = readFileSync(file, "utf8").replace(/\n\/\/# sourceMappingURL=.*$/, "");
    const out = text.replace(SPEC, (match, lead, q, spec) => {
      let target;
      if (spec.startsWith(".")) target = resolve(dirname(file), spec.replace(/\.js$/, ".d.ts"));
      else if (spec.startsWith("@farm/")) {
        const name = packageOf(spec);
        const dist = WORKSPACE_DIST[name];
        if (!dist) fail(`${relative(root, file)} names ${spec}: not a workspace the library may ship`);
        const sub = spec.slice(name.length + 1);
        target = join(dist, `${sub === "" ? "index" : sub}.d.ts`);
      } else return match;
      queue.push(target);
      let rel = relative(dirname(destOf(file)), destOf(target)).replace(/\.d\.ts$/, ".js");
      if (!rel.startsWith(".")) rel = `./${rel}`;
      return `${lead}${q}${rel}${q}`;
    });
    const dest = destOf(file);
    mkdirSync(dirname(dest), { recursive: true });
    writeFileSync(dest, out);
  }
  return seen.size;
}

async function main() {
  if (!existsSync(join(root, "client/dist/index.js"))) fail("client/dist is missing: run `npx tsc -b` first (make pack does)");
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(join(outDir, "lib"), { recursive: true });
  await bundle();
  const declarations = copyTypes();
  const rootPkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const { FARM_VERSION } = await import(pathToFileURL(join(root, "shared/dist/version.js")).href);
  const pkg = {
    name: "@farm/client",
    version: FARM_VERSION,
    description: clientPkg.description,
    // Not for a public registry: install from the tarball (`npm install ./farm-client-<version>.tgz`).
    private: true,
    type: "module",
    exports: { ".": { types: "./types/client/index.d.ts", default: "./lib/index.js" } },
    types: "./types/client/index.d.ts",
    engines: rootPkg.engines,
    dependencies: Object.fromEntries(RUNTIME.map((name) => [name, installedVersion(name)])),
  };
  writeFileSync(join(outDir, "package.json"), `${JSON.stringify(pkg, null, 2)}\n`);
  cpSync(join(root, "docs/client.md"), join(outDir, "README.md"));
  let tarball = null;
  if (!opts["no-tarball"]) {
    for (const f of readdirSync(bundleDir)) if (/^farm-client-.*\.tgz$/.test(f)) rmSync(join(bundleDir, f));
    const packed = spawnSync("npm", ["pack", "--silent", "--pack-destination", bundleDir], { cwd: outDir, encoding: "utf8" });
    if (packed.status !== 0) fail(`npm pack failed: ${packed.stderr}`);
    tarball = join(bundleDir, packed.stdout.trim().split("\n").pop());
  }
  log(`pack-client: ${relative(process.cwd(), outDir)}: lib/index.js, ${declarations} declaration files${tarball ? `; ${relative(process.cwd(), tarball)}` : ""}`);
  if (tarball) process.stdout.write(`${tarball}\n`);
}

await main();
