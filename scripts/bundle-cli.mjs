#!/usr/bin/env node
/**
 * Bundles the `farm` CLI with esbuild into an installable npm package:
 *
 *   cli/bundle/package/              (or --out DIR)
 *     package.json                   name @farm/cli, bin farm -> lib/farm.cjs, natives as dependencies
 *     lib/farm.cjs                   the command's entry (cli/src/entry.ts), alone and CommonJS:
 *                                    answers `farm --version`, else loads lib/main.js
 *     lib/one.cjs                    the plain runner: a plain `farm shell -- …`/`farm devices` and nothing
 *                                    else (cli/src/hot/plain-entry.ts), with lib/one.cjs.cache
 *     lib/hot.cjs                    the hot commands (farm shell, devices, …; cli/src/hot/hot-entry.ts),
 *                                    one CommonJS file compiled with lib/hot.cjs.cache (a V8 code cache)
 *     lib/main.js                    the CLI: only what `farm --help` needs, the rest in chunks
 *     lib/worker-main.js             the agent's detached video worker (forked by path)
 *     lib/chunk-*.js                 code loaded lazily, per command
 *     assets/agent-drizzle/          agent SQLite migrations
 *     assets/coordinator-drizzle/    coordinator SQLite migrations
 *     assets/dashboard/              the built dashboard the coordinator serves
 *
 *   node scripts/bundle-cli.mjs [--out DIR] [--quiet]
 *
 * Reads the compiled JavaScript (cli/dist, agent/dist, …; run `npx tsc -b`
 * and build the dashboard first: `make bundle` does). Native modules and
 * their loaders stay external and are the package's dependencies.
 *
 * Files located at run time with `new URL("<relative>", import.meta.url)`:
 * in the bundle every module lives in lib/, so each such literal is
 * rewritten at bundle time (the sources are not touched) to point at the
 * copy shipped in the package. The build fails on any such URL it does not
 * know, on a known one nobody references any more, and on
 * import.meta.dirname/filename, so a new runtime file cannot go missing from
 * the installed CLI unnoticed: add it to RUNTIME_FILES below.
 *
 * `make pack` packs it into cli/bundle/farm-cli-<version>.tgz, which
 * `npm install -g` installs (npm fetches and builds the natives).
 */
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { isBuiltin } from "node:module";
import { tmpdir } from "node:os";
import { readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import * as esbuild from "esbuild";

const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/$/, "");
const { values: opts } = parseArgs({ options: { out: { type: "string" }, quiet: { type: "boolean", default: false } } });
const outDir = resolve(opts.out ?? join(root, "cli/bundle/package"));
const libDir = join(outDir, "lib");
const log = (s) => opts.quiet || process.stderr.write(`${s}\n`);

/** Loaded with require()/import at run time, never bundled: native addons and their loaders. */
// tesseract.js starts its workers from files next to its own module (and reads the language data from its package).
// xpath is loaded with createRequire (its typings would pull the DOM library into the coordinator's program: webdriver/locate/xpath-locator.ts), which esbuild cannot follow.
const EXTERNAL = ["better-sqlite3", "sharp", "node-pty", "tesseract.js", "@tesseract.js-data/eng", "xpath"];
/** Left out and not shipped: pg's optional libpq binding, loaded only when asked for (farm never does). */
const NEVER_LOADED = ["pg-native"];

/**
 * The installed command's entry, built on its own as CommonJS (Node starts
 * a CommonJS file faster than an ES module; cli/src/entry.ts). It imports
 * the CLI (./main.js) at run time, unless it answered `farm --version`.
 */
const COMMAND_ENTRY = { src: "cli/dist/entry.js", out: "farm.cjs", loads: "./main.js" };

/**
 * The hot bundle: the CLI for the hot commands only (cli/src/tree/hot-path.ts),
 * one CommonJS file that lib/farm.cjs compiles through vm.Script with a V8
 * code cache made here (cli/src/hot/hot-bundle.ts): no ES module loader and
 * little compiling on `farm shell`'s and `farm devices`' start. `imports`:
 * the only import() targets it contains (repository paths of compiled
 * modules, or package names); any other import() in it throws, since
 * farm.cjs gives every other command line to lib/main.js.
 */
const HOT_ENTRY = {
  src: "cli/dist/hot/hot-entry.js",
  out: "hot.cjs",
  cache: "hot.cjs.cache",
  imports: [
    "cli/dist/tree/hot-path.js",
    "cli/dist/tree/run-leaf.js",
    "cli/dist/tree/commander-errors.js",
    "cli/dist/cli-error-report.js",
    "cli/dist/commands/devices.js",
    "cli/dist/commands/device.js",
    "cli/dist/hot/hot-shell.js",
    "cli/dist/hot/hot-devices.js",
    "cli/dist/hot/one-call-replay.js",
    "@farm/shared/gen/farm/v1/device_service_pb",
    "@farm/client/to-farm-error",
    "cli/dist/commands/ui.js",
    "cli/dist/interactive-shell.js",
    "ora",
  ],
};

/**
 * The plain runner (cli/src/hot/plain-run.ts): only what a plain success of
 * `farm shell -- …` or `farm devices` runs, one CommonJS file that
 * lib/farm.cjs loads before lib/hot.cjs (which it loads only when the
 * plain runner hands a run over). Every import() in it (the command tree's
 * load() of each leaf, which the plain runner never calls) becomes a module
 * that throws. Its code cache is made by running it once against a
 * port nothing listens on (`farm shell -- true`: parse, resolve, plan and
 * the call's start compile).
 */
const PLAIN_ENTRY = { src: "cli/dist/hot/plain-entry.js", out: "one.cjs", cache: "one.cjs.cache" };

/**
 * Bundled CommonJS (prom-client, node-forge, adbkit, …) calls require() for
 * Node's built-ins; an ES module has none of its own. esbuild puts the
 * banner on every output file; dropRequireBanners() takes it off the files
 * that never say `require`, most of them: each createRequire() costs a
 * little at start-up, and `farm shell` loads some forty files.
 */
const REQUIRE_BANNER = "import { createRequire as __farmCreateRequire } from \"node:module\";\nconst require = __farmCreateRequire(import.meta.url);";

/** Entry points, by output name (lib/<name>.js). */
const ENTRIES = {
  main: "cli/dist/main.js",
  // agent/src/video/video-sessions.ts forks new URL("./worker-main.js", import.meta.url).
  "worker-main": "agent/dist/video/worker-main.js",
};

/**
 * Everything the code finds with new URL("<relative>", import.meta.url):
 * repository path (as the compiled module resolves it) -> path in the package.
 * Directories are copied into the package; entries are built into lib/.
 */
const RUNTIME_FILES = {
  "agent/drizzle": "assets/agent-drizzle", // agent/src/db/open-agent-db.ts
  "coordinator/drizzle": "assets/coordinator-drizzle", // coordinator/src/db/open-database.ts
  "coordinator/drizzle-pg": "assets/coordinator-drizzle-pg", // coordinator/src/db/open-postgres.ts
  "dashboard/dist": "assets/dashboard", // coordinator/src/coordinator.ts (defaultDashboardDir)
  ...Object.fromEntries(Object.entries(ENTRIES).map(([name, src]) => [src, `lib/${name}.js`])),
};

const URL_LITERAL = /new URL\(\s*(["'])([^"'`]+)\1\s*,\s*import\.meta\.url\s*\)/g;
const URL_ANY = /new URL\([^)]*import\.meta\.url/;

function fail(message) {
  process.stderr.write(`bundle-cli: ${message}\n`);
  process.exit(1);
}

/** Rewrites the runtime-file URLs of the repository's own modules; see the header. */
function runtimeFilesPlugin(used) {
  const escaped = root.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return {
    name: "farm-runtime-files",
    setup(build) {
      build.onLoad({ filter: new RegExp(`^${escaped}/(?:agent|coordinator|shared|cli)/dist/.*\\.js$`) }, async (args) => {
        const src = await readFile(args.path, "utf8");
        if (!src.includes("import.meta")) return undefined;
        const where = relative(root, args.path);
        if (/import\.meta\.(dirname|filename)/.test(src)) {
          return { errors: [{ text: `${where}: import.meta.dirname/filename cannot be located in the bundle; use new URL("<relative>", import.meta.url)` }] };
        }
        const errors = [];
        const contents = src.replace(URL_LITERAL, (whole, _q, rel) => {
          const target = relative(root, resolve(dirname(args.path), rel));
          const inPackage = RUNTIME_FILES[target];
          if (inPackage === undefined) {
            errors.push({ text: `${where}: new URL(${JSON.stringify(rel)}, import.meta.url) -> ${target} is not shipped in the bundle; add it to RUNTIME_FILES in scripts/bundle-cli.mjs` });
            return whole;
          }
          used.add(target);
          let fromLib = relative(libDir, join(outDir, inPackage));
          if (!fromLib.startsWith(".")) fromLib = `./${fromLib}`;
          return `new URL(${JSON.stringify(fromLib)}, import.meta.url)`;
        });
        if (URL_ANY.test(contents.replace(/new URL\("[^"]*", import\.meta\.url\)/g, ""))) {
          errors.push({ text: `${where}: new URL(<not a string literal>, import.meta.url) cannot be located in the bundle` });
        }
        return errors.length ? { errors } : { contents, loader: "js" };
      });
    },
  };
}

function installedVersion(name) {
  return JSON.parse(readFileSync(join(root, "node_modules", name, "package.json"), "utf8")).version;
}

async function main() {
  const started = performance.now();
  for (const src of Object.values(ENTRIES)) {
    if (!existsSync(join(root, src))) fail(`${src} is missing: run \`npx tsc -b\` first (make bundle does)`);
  }
  if (!existsSync(join(root, "dashboard/dist/index.html"))) fail("dashboard/dist is missing: run `npm run build -w dashboard` first (make bundle does)");

  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(libDir, { recursive: true });
  const used = new Set();
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([name, src]) => [name, join(root, src)])),
    outdir: libDir,
    entryNames: "[name]",
    chunkNames: "chunk-[hash]",
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    external: [...EXTERNAL, ...NEVER_LOADED],
    banner: { js: REQUIRE_BANNER },
    plugins: [runtimeFilesPlugin(used)],
    metafile: true,
    logLevel: "warning",
  });
  dropRequireBanners(Object.keys(result.metafile.outputs).map((p) => resolve(root, p)).filter((p) => p.endsWith(".js")));
  await buildCommandEntry();
  await buildHotBundle();
  await buildPlainBundle();
  // Everything but the CLI's own entry is there because some module asks for it.
  const unused = Object.keys(RUNTIME_FILES).filter((k) => k !== ENTRIES.main && !used.has(k));
  if (unused.length) fail(`no module references ${unused.join(", ")} any more: update RUNTIME_FILES in scripts/bundle-cli.mjs`);

  for (const [src, dest] of Object.entries(RUNTIME_FILES)) {
    if (Object.values(ENTRIES).includes(src)) continue;
    cpSync(join(root, src), join(outDir, dest), { recursive: true });
  }

  const rootPkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const { FARM_VERSION } = await import(pathToFileURL(join(root, "shared/dist/version.js")).href);
  const pkg = {
    name: "@farm/cli",
    version: FARM_VERSION,
    description: "farm, a device farm for mobile apps: the CLI, coordinator and agent in one bundle",
    // Not for a public registry: install from the tarball (`npm install -g ./farm-cli-<version>.tgz`).
    private: true,
    type: "module",
    bin: { farm: `lib/${COMMAND_ENTRY.out}` },
    engines: rootPkg.engines,
    dependencies: Object.fromEntries(EXTERNAL.map((name) => [name, installedVersion(name)])),
  };
  writeFileSync(join(outDir, "package.json"), `${JSON.stringify(pkg, null, 2)}\n`);
  writeFileSync(
    join(outDir, "README.md"),
    `# farm ${FARM_VERSION}\n\nThe \`farm\` command (CLI, \`farm standalone\`, \`farm coordinator\`, \`farm agent\`), bundled.\n` +
      "Built from the farm repository with `make bundle`; see its README for usage.\n",
  );

  // main.js must still run itself (main.ts compares argv[1] with its own
  // import.meta.url): a smoke test catches it landing in a shared chunk.
  // The command's entry answers --version alone and loads main.js for --help.
  for (const [file, args, expect] of [["main.js", ["--version"], FARM_VERSION], [COMMAND_ENTRY.out, ["--version"], FARM_VERSION], [COMMAND_ENTRY.out, ["--help"], "Usage: farm"]]) {
    const smoke = spawnSync(process.execPath, [join(libDir, file), ...args, "--output", "json"], { encoding: "utf8", env: { ...process.env, FARM_COORDINATOR: "" } });
    if (smoke.status !== 0 || !smoke.stdout.includes(expect)) fail(`lib/${file} ${args.join(" ")} failed (exit ${smoke.status}): ${smoke.stdout}${smoke.stderr}`);
  }

  const files = readdirSync(libDir);
  const bytes = files.reduce((n, f) => n + statSync(join(libDir, f)).size, 0);
  const mainBytes = statSync(join(libDir, "main.js")).size;
  const entryBytes = statSync(join(libDir, COMMAND_ENTRY.out)).size;
  const eager = eagerClosure(result.metafile, "main.js");
  log(
    `bundle-cli: ${relative(process.cwd(), outDir) || "."}: ${files.length} files, ${(bytes / 1024).toFixed(0)} KiB in lib/ ` +
      `(${COMMAND_ENTRY.out} ${(entryBytes / 1024).toFixed(1)} KiB, main.js ${(mainBytes / 1024).toFixed(1)} KiB, loaded eagerly ${(eager / 1024).toFixed(0)} KiB) in ${(performance.now() - started).toFixed(0)} ms`,
  );
}

/** Takes REQUIRE_BANNER off the output files whose code never names `require` (a mention in a string or comment keeps it: harmless). */
function dropRequireBanners(files) {
  const head = `${REQUIRE_BANNER}\n`;
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    // An entry's #! line stays first.
    const shebang = /^#!.*\n/.exec(text)?.[0] ?? "";
    if (!text.startsWith(head, shebang.length)) fail(`${relative(root, file)} does not start with the require banner`);
    const body = text.slice(shebang.length + head.length);
    if (!/\brequire\b/.test(body)) writeFileSync(file, shebang + body);
  }
}

/** lib/farm.cjs: the command's entry, with what it needs inlined and the CLI left to a run-time import. */
async function buildCommandEntry() {
  const src = join(root, COMMAND_ENTRY.src);
  if (!existsSync(src)) fail(`${COMMAND_ENTRY.src} is missing: run \`npx tsc -b\` first (make bundle does)`);
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [src],
    outfile: join(libDir, COMMAND_ENTRY.out),
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    plugins: [
      {
        name: "farm-command-entry",
        setup(build) {
          // The CLI stays a file of its own (an ES module with its chunks), imported when needed.
          build.onResolve({ filter: /^\.\/main\.js$/ }, (args) => (args.importer === src ? { path: COMMAND_ENTRY.loads, external: true } : undefined));
        },
      },
    ],
    logLevel: "silent",
  });
  // A warning here (import.meta, which CommonJS has not) would be a broken entry.
  if (result.warnings.length) fail(`${COMMAND_ENTRY.src}: ${result.warnings.map((w) => w.text).join("; ")}`);
  const text = readFileSync(join(libDir, COMMAND_ENTRY.out), "utf8");
  if (!text.includes(`import(${JSON.stringify(COMMAND_ENTRY.loads)})`)) fail(`${COMMAND_ENTRY.out} does not import ${COMMAND_ENTRY.loads} at run time`);
}

/**
 * lib/hot.cjs and its code cache. The cache is made by running the bundle
 * once (`farm devices` against a coordinator that is not there: the client,
 * the call and the error path compile), so functions V8 compiles lazily are
 * in it too; the run's error output is expected and checked.
 */
async function buildHotBundle() {
  const src = join(root, HOT_ENTRY.src);
  if (!existsSync(src)) fail(`${HOT_ENTRY.src} is missing: run \`npx tsc -b\` first (make bundle does)`);
  const allowed = new Set(HOT_ENTRY.imports);
  const found = new Set();
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [src],
    outfile: join(libDir, HOT_ENTRY.out),
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    external: [...EXTERNAL, ...NEVER_LOADED],
    // hot-bundle.ts passes the bundle's own URL as this parameter (cli-main.ts finds main.js beside it).
    define: { "import.meta.url": "__farm_hot_url" },
    plugins: [
      {
        name: "farm-hot-imports",
        setup(build) {
          build.onResolve({ filter: /.*/ }, (args) => {
            if (args.kind !== "dynamic-import") return undefined;
            const target = args.path.startsWith(".") ? relative(root, resolve(args.resolveDir, args.path)) : args.path;
            if (allowed.has(target)) {
              found.add(target);
              return undefined;
            }
            return { path: target, namespace: "farm-not-hot" };
          });
          build.onLoad({ filter: /.*/, namespace: "farm-not-hot" }, (args) => ({
            contents: `throw new Error(${JSON.stringify(`farm: ${args.path} is not in the hot bundle (lib/hot.cjs); scripts/bundle-cli.mjs HOT_ENTRY.imports`)});`,
            loader: "js",
          }));
          // Files located at run time (RUNTIME_FILES) cannot be: only cli-main.ts's main.js, beside the bundle in lib/.
          build.onLoad({ filter: /\/(?:agent|coordinator|shared|cli|client)\/dist\/.*\.js$/ }, async (args) => {
            const text = await readFile(args.path, "utf8");
            const where = relative(root, args.path);
            if (text.includes("import.meta") && where !== "cli/dist/cli-main.js") return { errors: [{ text: `${where} uses import.meta, which the hot bundle cannot locate; keep it out of the hot commands' imports` }] };
            return undefined;
          });
        },
      },
    ],
    logLevel: "silent",
  });
  if (result.warnings.length) fail(`${HOT_ENTRY.out}: ${result.warnings.map((w) => w.text).join("; ")}`);
  const stale = [...allowed].filter((t) => !found.has(t));
  if (stale.length) fail(`${HOT_ENTRY.out}: nothing imports ${stale.join(", ")} any more: update HOT_ENTRY.imports in scripts/bundle-cli.mjs`);
  const loader = pathToFileURL(join(root, "cli/dist/hot/hot-bundle.js")).href;
  const home = mkdtempSync(join(tmpdir(), "farm-hot-cache-"));
  try {
    const run = spawnSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `const h = await import(${JSON.stringify(loader)}); const b = h.loadHotBundle(${JSON.stringify(libDir)}); h.writeCacheAtExit(${
          JSON.stringify(libDir)
        }, b); process.argv = [process.argv[0], "farm", "devices"]; await b.exports.runAsProcess();`,
      ],
      // A port nothing listens on: the call fails at once, after the client's code has run.
      { encoding: "utf8", env: { ...process.env, FARM_HOME: home, FARM_CONFIG: join(home, "none.json"), FARM_COORDINATOR: "http://127.0.0.1:9", FARM_TOKEN: "farm-hot-cache", FARM_OUTPUT: "json" }, timeout: 60_000 },
    );
    if (!/"code":"COORDINATOR_UNAVAILABLE"|"code":"UNAVAILABLE"/.test(run.stdout) || !existsSync(join(libDir, HOT_ENTRY.cache))) {
      fail(`making ${HOT_ENTRY.cache} failed (exit ${run.status}): ${run.stdout}${run.stderr}`);
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** lib/one.cjs and its code cache; see PLAIN_ENTRY. */
async function buildPlainBundle() {
  const src = join(root, PLAIN_ENTRY.src);
  if (!existsSync(src)) fail(`${PLAIN_ENTRY.src} is missing: run \`npx tsc -b\` first (make bundle does)`);
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [src],
    outfile: join(libDir, PLAIN_ENTRY.out),
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    external: [...EXTERNAL, ...NEVER_LOADED],
    plugins: [
      {
        name: "farm-plain-only",
        setup(build) {
          // Every import() (the tree's leaves' load(), which the plain runner replaces) throws: the full path is lib/hot.cjs's.
          build.onResolve({ filter: /.*/ }, (args) => (args.kind === "dynamic-import" ? { path: args.path, namespace: "farm-not-plain" } : undefined));
          build.onLoad({ filter: /.*/, namespace: "farm-not-plain" }, (args) => ({
            contents: `throw new Error(${JSON.stringify(`farm: ${args.path} is not in the plain runner (lib/${PLAIN_ENTRY.out}; cli/src/hot/plain-run.ts)`)});`,
            loader: "js",
          }));
          build.onLoad({ filter: /\/(?:agent|coordinator|shared|cli|client)\/dist\/.*\.js$/ }, async (args) => {
            const text = await readFile(args.path, "utf8");
            if (text.includes("import.meta")) return { errors: [{ text: `${relative(root, args.path)} uses import.meta, which lib/${PLAIN_ENTRY.out} cannot locate` }] };
            return undefined;
          });
        },
      },
    ],
    logLevel: "silent",
  }).catch((err) => fail(`${PLAIN_ENTRY.out}: ${err.message}`));
  if (result.warnings.length) fail(`${PLAIN_ENTRY.out}: ${result.warnings.map((w) => w.text).join("; ")}`);
  // lib/farm.cjs runs it with its own require (cli/src/hot/hot-bundle.ts `builtins`): Node's built-in modules only.
  const required = [...readFileSync(join(libDir, PLAIN_ENTRY.out), "utf8").matchAll(/\brequire\((["'])([^"']+)\1\)/g)].map((m) => m[2]);
  const notBuiltin = required.filter((name) => !isBuiltin(name));
  if (notBuiltin.length) fail(`${PLAIN_ENTRY.out} requires ${notBuiltin.join(", ")}: it may require Node's built-in modules only (lib/farm.cjs gives it its own require)`);
  const loader = pathToFileURL(join(root, "cli/dist/hot/hot-bundle.js")).href;
  const home = mkdtempSync(join(tmpdir(), "farm-plain-cache-"));
  try {
    const run = spawnSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `const h = await import(${JSON.stringify(loader)}); const dir = ${JSON.stringify(libDir)}; const b = h.loadHotBundle(dir, ${JSON.stringify(PLAIN_ENTRY.out)}); ` +
        `h.writeCacheAtExit(dir, b, ${JSON.stringify(PLAIN_ENTRY.out)}); const r = await b.exports.runPlain(["shell", "--", "true"], process.env); r.takeSignal(); ` +
        `process.stdout.write(JSON.stringify({ command: r.call?.command, sent: r.call?.outcome.sent }));`,
      ],
      // A port nothing listens on: the call is not sent, after the plain runner's code has run.
      { encoding: "utf8", env: { ...process.env, FARM_HOME: home, FARM_CONFIG: join(home, "none.json"), FARM_COORDINATOR: "http://127.0.0.1:9", FARM_TOKEN: "farm-plain-cache", FARM_DEVICE: "cache", FARM_OUTPUT: "json" }, timeout: 60_000 },
    );
    if (run.stdout !== JSON.stringify({ command: "shell", sent: false }) || !existsSync(join(libDir, PLAIN_ENTRY.cache))) {
      fail(`making ${PLAIN_ENTRY.cache} failed (exit ${run.status}): ${run.stdout}${run.stderr}`);
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** Bytes of the output files a statically imports (what starts before any command is chosen). */
function eagerClosure(metafile, entry) {
  const outputs = new Map(Object.entries(metafile.outputs).map(([p, o]) => [resolve(root, p), o]));
  const seen = new Set();
  const visit = (p) => {
    if (seen.has(p)) return;
    seen.add(p);
    for (const imp of outputs.get(p)?.imports ?? []) if (imp.kind === "import-statement" && !imp.external) visit(resolve(root, imp.path));
  };
  visit(join(libDir, entry));
  return [...seen].reduce((n, p) => n + (outputs.get(p)?.bytes ?? 0), 0);
}

await main();
