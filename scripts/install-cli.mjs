#!/usr/bin/env node
/**
 * Installs the bundled CLI (scripts/bundle-cli.mjs) under a prefix, offline:
 *
 *   PREFIX/lib/farm/                 the bundle package (lib/, assets/, package.json)
 *   PREFIX/lib/farm/node_modules/    its native dependencies, copied from this
 *                                    checkout's node_modules (already built by `npm ci`)
 *   PREFIX/bin/farm -> ../lib/farm/lib/farm.cjs
 *
 *   node scripts/install-cli.mjs --prefix PREFIX [--from cli/bundle/package]
 *   node scripts/install-cli.mjs --prefix PREFIX --uninstall
 *
 * The natives are the ones this checkout runs with, so the install is for
 * this machine's platform and Node ABI. For another machine, install the
 * packed tarball with npm instead (`make pack`, then
 * `npm install -g cli/bundle/farm-cli-<version>.tgz`), which fetches and
 * builds them there.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/$/, "");
const { values: opts } = parseArgs({
  options: { prefix: { type: "string" }, from: { type: "string" }, uninstall: { type: "boolean", default: false }, quiet: { type: "boolean", default: false } },
});
const log = (s) => opts.quiet || process.stderr.write(`${s}\n`);
function fail(message) {
  process.stderr.write(`install-cli: ${message}\n`);
  process.exit(1);
}
if (!opts.prefix) fail("--prefix PREFIX is required");
const prefix = resolve(opts.prefix);
const from = resolve(opts.from ?? join(root, "cli/bundle/package"));
const home = join(prefix, "lib", "farm");
const bin = join(prefix, "bin", "farm");
/** The package's bin (bundle-cli.mjs), and what older installs linked to. */
const ENTRY = "lib/farm.cjs";
const OLD_ENTRIES = ["lib/main.js"];
const target = relative(dirname(bin), join(home, ENTRY));
const ours = [target, ...OLD_ENTRIES.map((e) => relative(dirname(bin), join(home, e)))];

/** Needed only to build or fetch a native addon, never at run time. */
const BUILD_ONLY = new Set(["prebuild-install", "node-addon-api", "node-gyp"]);

/** Our link, or nothing: never replace a `farm` someone else put there. */
function removeOurBin() {
  let st;
  try {
    st = lstatSync(bin);
  } catch {
    return;
  }
  if (!st.isSymbolicLink()) fail(`${bin} exists and is not a symlink; remove it first`);
  const to = readlinkSync(bin);
  if (/(^|\/)node_modules\/@farm\/cli\//.test(to)) fail(`${bin} is npm's (${to}): \`npm uninstall -g --prefix ${prefix} @farm/cli\` first`);
  if (!ours.includes(to)) fail(`${bin} points at ${to}, not at this install; remove it first`);
  rmSync(bin);
}

if (opts.uninstall) {
  removeOurBin();
  rmSync(home, { recursive: true, force: true });
  log(`install-cli: removed ${home} and ${bin}`);
  process.exit(0);
}

if (!existsSync(join(from, ENTRY))) fail(`${from} has no bundle: run \`make bundle\` (or node scripts/bundle-cli.mjs) first`);
const pkg = JSON.parse(readFileSync(join(from, "package.json"), "utf8"));
if (pkg.bin?.farm !== ENTRY) fail(`${from}/package.json's bin is ${JSON.stringify(pkg.bin)}, not farm -> ${ENTRY}: rebuild it with this checkout's scripts/bundle-cli.mjs`);

/**
 * The directories (relative to root/node_modules, nested ones included) that
 * the externals need at run time, found the way Node resolves them: from a
 * package's directory upwards.
 */
function runtimeClosure(names) {
  const found = new Map(); // path relative to root -> package.json
  const visit = (name, fromDir, optional) => {
    for (let dir = fromDir;; dir = dirname(dir)) {
      const candidate = join(dir, "node_modules", name);
      if (existsSync(join(candidate, "package.json"))) {
        const rel = relative(root, candidate);
        if (found.has(rel)) return;
        if (lstatSync(candidate).isSymbolicLink()) fail(`${rel} is a symlink; cannot ship it`);
        const p = JSON.parse(readFileSync(join(candidate, "package.json"), "utf8"));
        found.set(rel, p);
        for (const dep of Object.keys(p.dependencies ?? {})) if (!BUILD_ONLY.has(dep)) visit(dep, candidate, false);
        // Platform packages (sharp's @img/*): only the ones npm installed here.
        for (const dep of Object.keys(p.optionalDependencies ?? {})) visit(dep, candidate, true);
        return;
      }
      if (dir === root || dir === dirname(dir)) break;
    }
    if (!optional) fail(`${name} is not installed in ${root}/node_modules: run \`npm ci\``);
  };
  for (const name of names) visit(name, root, false);
  return found;
}

/** Drops a native addon's sources and build leftovers; keeps build/Release/*.node and this platform's prebuilds. */
function keepFile(pkgDir, isNative) {
  const platformPrebuild = `${process.platform}-${process.arch}`;
  return (src) => {
    if (!isNative) return true;
    const rel = relative(pkgDir, src);
    if (rel === "") return true;
    const [top, second, third] = rel.split(sep);
    if (["deps", "src", "third_party", "node-addon-api"].includes(top)) return false;
    if (top === "prebuilds") return second === undefined || second === platformPrebuild;
    if (top === "build") {
      if (second === undefined) return true;
      if (second !== "Release") return false;
      return third === undefined || (!/\.(a|o|d)$/.test(third) && !["obj", "obj.target", ".deps", "test_extension.node"].includes(third));
    }
    return true;
  };
}

const staging = `${home}.new-${process.pid}`;
rmSync(staging, { recursive: true, force: true });
mkdirSync(dirname(home), { recursive: true });
cpSync(from, staging, { recursive: true });
const closure = runtimeClosure(Object.keys(pkg.dependencies ?? {}));
for (const rel of closure.keys()) {
  const src = join(root, rel);
  const keep = keepFile(src, existsSync(join(src, "binding.gyp")));
  // Nested node_modules come with their package only if they are part of the closure.
  cpSync(src, join(staging, rel), { recursive: true, filter: (s) => keep(s) && !relative(src, s).split(sep).includes("node_modules") });
}
chmodSync(join(staging, ENTRY), 0o755);

// Swap in the new tree, then drop the old one.
const old = `${home}.old-${process.pid}`;
if (existsSync(home)) renameSync(home, old);
renameSync(staging, home);
rmSync(old, { recursive: true, force: true });

mkdirSync(dirname(bin), { recursive: true });
removeOurBin();
symlinkSync(target, bin);

const check = spawnSync(process.execPath, [bin, "--version", "--output", "json"], { encoding: "utf8" });
if (check.status !== 0) fail(`${bin} --version failed: ${check.stdout}${check.stderr}`);
log(`install-cli: farm ${pkg.version} in ${home} (${closure.size} packages in node_modules), ${bin} -> ${target}`);
const onPath = (process.env.PATH ?? "").split(":").includes(dirname(bin));
if (!onPath) log(`install-cli: ${dirname(bin)} is not on PATH; add it to run \`farm\``);
