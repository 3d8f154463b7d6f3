import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { constants, Script } from "node:vm";
import type { Handover } from "./recorded-call.js";

/**
 * Loads the hot bundle (lib/hot.cjs, built from hot-entry.ts by
 * scripts/bundle-cli.mjs) through vm.Script with the V8 code cache shipped
 * beside it (lib/hot.cjs.cache), so `farm shell`, `farm devices`, … skip
 * the ES module loader and most of compiling. Node 20 has no compile cache
 * of its own (module.enableCompileCache is Node 22).
 *
 * The cache is an optimisation only: V8 rejects one made by another V8
 * version, with other flags or for a source of another length, and the
 * script is then compiled from source as usual (cacheRejected says so).
 * It travels in the same package as the bundle it was made from.
 */
export const HOT_BUNDLE = "hot.cjs";
/** The plain runner (plain-entry.ts): only what a plain success of `farm shell`/`farm devices` runs. */
export const PLAIN_BUNDLE = "one.cjs";
/** A bundle's code cache: its file name and this. */
export const CACHE_SUFFIX = ".cache";
/** lib/hot.cjs's. */
export const HOT_CACHE = HOT_BUNDLE + CACHE_SUFFIX;

/** The parameter the bundle's import.meta.url is defined as (esbuild `define`). */
export const HOT_URL_PARAM = "__farm_hot_url";

/** What hot-entry.ts exports. */
export interface HotBundle {
  isHotCommand(argv: readonly string[], env: NodeJS.ProcessEnv): boolean;
  runAsProcess(handover?: Handover): Promise<void>;
}

/** What plain-entry.ts exports. */
export interface PlainBundle {
  runPlain(argv: string[], env: NodeJS.ProcessEnv): Promise<Handover | undefined>;
}

export interface LoadedHotBundle<T = HotBundle> {
  exports: T;
  /** undefined: no cache file; true: V8 refused it and compiled from source. */
  cacheRejected: boolean | undefined;
  /** The code cache of everything compiled so far (bundle-time: after a run, lazily compiled functions included). */
  createCache(): Buffer;
}

/** The bundle's text as a CommonJS module body, with import.meta.url as one more parameter. */
function wrap(source: string): string {
  // The #! line of the bundled entry is not JavaScript inside a function.
  const body = source.startsWith("#!") ? source.slice(source.indexOf("\n")) : source;
  return `(function (exports, require, module, __filename, __dirname, ${HOT_URL_PARAM}) {${body}\n})`;
}

/**
 * The hot bundle (or `name`, the plain runner) in dir, run; undefined when
 * dir has none (the unbundled CLI, or a package built before it).
 * `builtins`: the caller's own require, for a bundle that requires Node's
 * built-in modules only and never reads import.meta.url (lib/one.cjs;
 * scripts/bundle-cli.mjs checks both): it then gets that require instead
 * of one made with createRequire, and no URL (together about 1 % of a
 * plain `farm shell`'s instructions).
 */
export function loadHotBundle<T = HotBundle>(dir: string, name = HOT_BUNDLE, builtins?: NodeJS.Require): LoadedHotBundle<T> | undefined {
  const file = join(dir, name);
  if (!existsSync(file)) return undefined;
  let cachedData: Buffer | undefined;
  try {
    cachedData = readFileSync(file + CACHE_SUFFIX);
  } catch {
    cachedData = undefined;
  }
  const script = new Script(wrap(readFileSync(file, "utf8")), {
    filename: file,
    ...(cachedData ? { cachedData } : {}),
    // import() of the natives (external to the bundle) goes to Node's own loader, as in any module.
    importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  const module = { exports: {} as T };
  const fn = script.runInThisContext() as (...args: unknown[]) => void;
  fn.call(module.exports, module.exports, builtins ?? createRequire(file), module, file, dir, builtins ? undefined : pathToFileURL(file).href);
  return { exports: module.exports, cacheRejected: cachedData ? script.cachedDataRejected === true : undefined, createCache: () => script.createCachedData() };
}

/** Writes the code cache of dir's bundle `name` when this process exits (scripts/bundle-cli.mjs, after a run of it). */
export function writeCacheAtExit(dir: string, loaded: LoadedHotBundle<unknown>, name = HOT_BUNDLE): void {
  process.once("exit", () => writeFileSync(join(dir, name + CACHE_SUFFIX), loaded.createCache()));
}
