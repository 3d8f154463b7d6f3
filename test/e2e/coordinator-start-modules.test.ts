/**
 * What a started `farm coordinator` has loaded before anyone uses OCR or
 * WebDriver: neither tesseract.js nor the WebDriver session's locators
 * (xmldom, xpath, re2js). Their modules stay resident for the process's
 * life (docs/performance.md, round 15), so they load on first use
 * (ocr-devsim.test.ts and webdriver.test.ts drive that use). The modules
 * loaded are recorded by a module hook given to the real process through
 * NODE_OPTIONS.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFarm, type FarmProcess } from "../support/farm-process.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

let dir: TempDir;
let coordinator: FarmProcess;
let loaded: string[];

beforeAll(async () => {
  dir = await makeTempDir("start-modules");
  const log = join(dir.path, "modules.log");
  // ES modules through a loader hook; CommonJS ones (tesseract.js, xpath) through require's cache.
  await writeFile(
    join(dir.path, "hooks.mjs"),
    `import { appendFileSync } from "node:fs";
export async function load(url, context, next) { appendFileSync(${JSON.stringify(log)}, url + "\\n"); return next(url, context); }`,
  );
  await writeFile(
    join(dir.path, "register.mjs"),
    `import { register, createRequire } from "node:module";
import { appendFileSync } from "node:fs";
register(${JSON.stringify(pathToFileURL(join(dir.path, "hooks.mjs")).href)});
const require = createRequire(import.meta.url);
setInterval(() => appendFileSync(${JSON.stringify(log)}, Object.keys(require.cache).map((f) => "cjs:" + f + "\\n").join("")), 200).unref();`,
  );
  coordinator = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", join(dir.path, "data")], {
    FARM_HOME: join(dir.path, "home"),
    NODE_OPTIONS: `--import=${pathToFileURL(join(dir.path, "register.mjs")).href}`,
  });
  // The cache is written every 200 ms: wait until a write after the ready line is seen.
  const size = async () => (await readFile(log, "utf8")).length;
  const before = await size();
  for (let i = 0; i < 200 && (await size()) === before; i++) await new Promise((r) => setTimeout(r, 50));
  loaded = (await readFile(log, "utf8")).split("\n");
});

afterAll(async () => {
  await coordinator?.stop();
  await dir?.remove();
});

describe("a started coordinator", () => {
  it("has loaded the coordinator and its CommonJS dependencies (the record works)", () => {
    expect(loaded.some((u) => u.endsWith("/coordinator/dist/coordinator.js"))).toBe(true);
    expect(loaded.some((u) => u.startsWith("cjs:") && u.includes("/node_modules/better-sqlite3/"))).toBe(true);
  });

  it("has not loaded tesseract.js (OCR loads it on its first page)", () => {
    expect(loaded.filter((u) => u.includes("/node_modules/tesseract.js/"))).toEqual([]);
  });

  it("has not loaded the WebDriver session or its locators (the first session loads them)", () => {
    expect(loaded.filter((u) => /\/webdriver\/webdriver-session\.js$|\/webdriver\/locate\/|\/node_modules\/(@xmldom|xpath|re2js)\//.test(u))).toEqual([]);
  });
});
