#!/usr/bin/env node
/**
 * Packs the bundled CLI (scripts/bundle-cli.mjs) into the one tarball lab
 * hosts install from, self-contained:
 *
 *   OUT/farm-cli-<version>.tgz       npm install -g [--prefix DIR] farm-cli-<version>.tgz
 *     package/lib/                   the bundle (farm.cjs, main.js, chunks, worker-main.js)
 *     package/lib/node_modules/      the native modules and what they load (better-sqlite3,
 *                                    sharp, node-pty, tesseract.js), built by this checkout's `npm ci`
 *     package/assets/                migrations and the dashboard
 *     package/deploy/                the systemd units, udev rule and example configs
 *
 *   node scripts/pack-cli.mjs [--from cli/bundle/package] [--out cli/bundle] [--quiet]
 *
 * Prints the tarball's path on stdout.
 *
 * Why the natives travel inside lib/ and not as npm dependencies: as
 * dependencies npm fetches them and runs their install scripts, which
 * download prebuilt binaries from GitHub (unreachable from many labs) and
 * otherwise compile them (python3, make, g++, Node headers, minutes per
 * host). As bundleDependencies npm still runs those scripts, and packs each
 * one by its own `files` list, which leaves out the built binary. Under
 * lib/node_modules they are plain files: npm copies them, runs nothing and
 * needs no network (`npm install -g --offline` works), and Node finds them
 * from lib/ like any node_modules. The price: the tarball is for the
 * platform and Node major it was packed on, which package.json says (os,
 * cpu, libc, engines), so npm refuses it elsewhere instead of installing a
 * binary that cannot load.
 */
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, lstatSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/$/, "");
const { values: opts } = parseArgs({ options: { from: { type: "string" }, out: { type: "string" }, quiet: { type: "boolean", default: false } } });
const log = (s) => opts.quiet || process.stderr.write(`${s}\n`);
function fail(message) {
  process.stderr.write(`pack-cli: ${message}\n`);
  process.exit(1);
}
const from = resolve(opts.from ?? join(root, "cli/bundle/package"));
const out = resolve(opts.out ?? join(root, "cli/bundle"));
const ENTRY = "lib/farm.cjs";
/** Shipped for the operator (docs/operations/install.md): repository path -> path in the package. */
const DEPLOY_FILES = { "deploy/systemd": "deploy/systemd", "deploy/udev": "deploy/udev", "deploy/config": "deploy/config" };
/** Needed only to build or fetch a native addon, never at run time. */
const BUILD_ONLY = new Set(["prebuild-install", "node-addon-api", "node-gyp"]);

if (!existsSync(join(from, ENTRY))) fail(`${from} has no bundle: run \`make bundle\` (or node scripts/bundle-cli.mjs) first`);
const pkg = JSON.parse(readFileSync(join(from, "package.json"), "utf8"));
if (pkg.bin?.farm !== ENTRY) fail(`${from}/package.json's bin is ${JSON.stringify(pkg.bin)}, not farm -> ${ENTRY}: rebuild it with this checkout's scripts/bundle-cli.mjs`);

/**
 * The directories (relative to root/node_modules, nested ones included) that
 * the natives need at run time, found the way Node resolves them: from a
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

/** glibc or musl, as npm's `libc` field names them (undefined when unknown). */
function libc() {
  const report = process.report?.getReport?.();
  if (report?.header?.glibcVersionRuntime) return "glibc";
  if (process.platform === "linux") return "musl";
  return undefined;
}

const staging = join(out, `.pack-${process.pid}`);
const stagedPkg = join(staging, "package");
rmSync(staging, { recursive: true, force: true });
mkdirSync(staging, { recursive: true });
try {
  cpSync(from, stagedPkg, { recursive: true });
  for (const [src, dest] of Object.entries(DEPLOY_FILES)) cpSync(join(root, src), join(stagedPkg, dest), { recursive: true });

  const natives = pkg.dependencies ?? {};
  const closure = runtimeClosure(Object.keys(natives));
  for (const rel of closure.keys()) {
    const src = join(root, rel);
    const keep = keepFile(src, existsSync(join(src, "binding.gyp")));
    // Nested node_modules come with their package only if they are part of the closure.
    cpSync(src, join(stagedPkg, "lib", rel), { recursive: true, filter: (s) => keep(s) && !relative(src, s).split(sep).includes("node_modules") });
  }

  const major = Number(process.versions.node.split(".")[0]);
  const minimum = /^>=(\d+)\.(\d+)/.exec(pkg.engines?.node ?? "");
  const floor = minimum && Number(minimum[1]) === major ? `${minimum[1]}.${minimum[2]}` : `${major}.0`;
  const { dependencies: _natives, ...rest } = pkg;
  const packed = {
    ...rest,
    // better-sqlite3 is built against this Node's ABI; sharp and node-pty for this platform.
    engines: { node: `>=${floor} <${major + 1}` },
    os: [process.platform],
    cpu: [process.arch],
    ...(libc() ? { libc: [libc()] } : {}),
    farmNatives: { ...natives, nodeAbi: process.versions.modules, platform: `${process.platform}-${process.arch}` },
  };
  writeFileSync(join(stagedPkg, "package.json"), `${JSON.stringify(packed, null, 2)}\n`);

  mkdirSync(out, { recursive: true });
  const tgz = join(out, `farm-cli-${pkg.version}.tgz`);
  rmSync(tgz, { force: true });
  const r = spawnSync("npm", ["pack", "--silent", "--pack-destination", out], { cwd: stagedPkg, encoding: "utf8" });
  if (r.status !== 0) fail(`npm pack failed (exit ${r.status}): ${r.stdout}${r.stderr}`);
  if (!existsSync(tgz)) fail(`npm pack did not write ${tgz}: ${r.stdout}`);
  log(`pack-cli: ${relative(process.cwd(), tgz) || tgz}: farm ${pkg.version} for ${process.platform}-${process.arch}, Node ${major} (${closure.size} packages in lib/node_modules)`);
  process.stdout.write(`${tgz}\n`);
} finally {
  rmSync(staging, { recursive: true, force: true });
}
