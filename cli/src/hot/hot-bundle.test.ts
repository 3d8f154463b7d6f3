import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CACHE_SUFFIX, HOT_BUNDLE, HOT_CACHE, loadHotBundle, PLAIN_BUNDLE, type PlainBundle } from "./hot-bundle.js";

/**
 * The loader of the installed CLI's hot bundle (lib/hot.cjs). Whether V8
 * takes the shipped cache is checked on the installed package, in a fresh
 * process (test/deploy/install-cli.test.ts): in this process V8's own
 * compilation cache could answer first.
 */
let root: string;
let n = 0;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "farm-hot-bundle-"));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A directory with a bundle of this text (made unique, so no two tests compile the same source). */
function bundleDir(text: string): string {
  const dir = mkdtempSync(join(root, "lib-"));
  writeFileSync(join(dir, HOT_BUNDLE), `#!/usr/bin/env node\n// ${n++}\n${text}`);
  writeFileSync(join(dir, "beside.cjs"), "module.exports = 'beside';");
  return dir;
}

const text = [
  "exports.isHotCommand = (argv) => argv[0] === 'devices';",
  "exports.runAsProcess = async () => {};",
  "exports.url = __farm_hot_url;",
  "exports.file = __filename;",
  "exports.beside = require('./beside.cjs');",
].join("\n");

describe("loadHotBundle", () => {
  it("is undefined without a bundle (the unbundled CLI)", () => {
    expect(loadHotBundle(mkdtempSync(join(root, "empty-")))).toBeUndefined();
  });

  it("runs the bundle as a CommonJS module: its exports, require from its directory, import.meta.url's stand-in", () => {
    const dir = bundleDir(text);
    const loaded = loadHotBundle(dir);
    const exports = loaded?.exports as unknown as Record<string, unknown>;
    expect(loaded?.cacheRejected).toBeUndefined();
    expect(loaded?.exports.isHotCommand(["devices"], {})).toBe(true);
    expect(loaded?.exports.isHotCommand(["lease", "list"], {})).toBe(false);
    expect(exports["url"]).toBe(pathToFileURL(join(dir, HOT_BUNDLE)).href);
    expect(exports["file"]).toBe(join(dir, HOT_BUNDLE));
    expect(exports["beside"]).toBe("beside");
    expect(loaded?.createCache().length).toBeGreaterThan(0);
  });

  it("compiles from source when V8 refuses the cache (another build's, or damaged)", () => {
    const dir = bundleDir(text);
    writeFileSync(join(dir, HOT_CACHE), Buffer.from("not a V8 code cache, long enough to be looked at".repeat(4)));
    const loaded = loadHotBundle(dir);
    expect(loaded?.cacheRejected).toBe(true);
    expect(loaded?.exports.isHotCommand(["devices"], {})).toBe(true);
  });

  it("loads another bundle by name with that bundle's own cache (lib/one.cjs, the plain runner), not the hot bundle's", () => {
    const dir = bundleDir(text);
    // A new source for every load: V8's own compilation cache in this process would answer a known one first.
    const plain = () => writeFileSync(join(dir, PLAIN_BUNDLE), `// ${n++}\nexports.runPlain = async () => undefined; exports.file = __filename;`);
    plain();
    const made = loadHotBundle<PlainBundle>(dir, PLAIN_BUNDLE);
    expect((made?.exports as unknown as Record<string, unknown>)["file"]).toBe(join(dir, PLAIN_BUNDLE));
    expect(made?.cacheRejected).toBeUndefined();
    // A damaged hot.cjs.cache is not looked at for one.cjs; a damaged one.cjs.cache is.
    writeFileSync(join(dir, HOT_CACHE), Buffer.from("not a V8 code cache, long enough to be looked at".repeat(4)));
    plain();
    expect(loadHotBundle<PlainBundle>(dir, PLAIN_BUNDLE)?.cacheRejected).toBeUndefined();
    writeFileSync(join(dir, PLAIN_BUNDLE + CACHE_SUFFIX), Buffer.from("not a V8 code cache either, long enough to be looked at".repeat(4)));
    plain();
    expect(loadHotBundle<PlainBundle>(dir, PLAIN_BUNDLE)?.cacheRejected).toBe(true);
  });

  it("a bundle given the caller's require (the plain runner: built-ins only) runs with it and gets no URL", () => {
    const dir = bundleDir(text);
    writeFileSync(join(dir, PLAIN_BUNDLE), `// ${n++}\nexports.runPlain = async () => undefined; exports.same = require === globalThis.__farmGiven; exports.url = __farm_hot_url; exports.path = require("node:path").sep;`);
    const given = ((name: string) => (name === "node:path" ? { sep: "/" } : undefined)) as unknown as NodeJS.Require;
    (globalThis as Record<string, unknown>)["__farmGiven"] = given;
    try {
      const exports = loadHotBundle<PlainBundle>(dir, PLAIN_BUNDLE, given)?.exports as unknown as Record<string, unknown>;
      expect(exports).toMatchObject({ same: true, url: undefined, path: "/" });
    } finally {
      delete (globalThis as Record<string, unknown>)["__farmGiven"];
    }
  });

  it("a bundle that throws while loading throws (a broken install is not hidden)", () => {
    expect(() => loadHotBundle(bundleDir("throw new Error('broken bundle');"))).toThrow("broken bundle");
  });
});
