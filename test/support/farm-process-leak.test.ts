import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { waitFor } from "./farm-process.js";
import { processAlive } from "./process-alive.js";
import { makeTempDir, type TempDir } from "./temp-dir.js";

// A test file that loses a process startFarm started (a hook timed out while it started, a test threw
// before its stop) must not leave it running after the file: its worker kills it as it exits.

const here = dirname(fileURLToPath(import.meta.url));
const vitestBin = join(dirname(createRequire(import.meta.url).resolve("vitest/package.json")), "vitest.mjs");
const TEST_MS = 300_000;
let dir: TempDir | undefined;
let lost: number | undefined;

afterEach(async () => {
  if (lost !== undefined && processAlive(lost)) process.kill(lost, "SIGKILL");
  await dir?.remove();
});

it("kills a farm process its test file lost when the file's worker exits", async () => {
  dir = await makeTempDir("farm-leak");
  const out = join(dir.path, "pid");
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("VITEST")));
  const run = spawn(process.execPath, [vitestBin, "run", "--config", join(here, "leak-fixture", "vitest.config.ts")], { env: { ...env, FARM_LEAK_OUT: out }, stdio: "ignore" });
  const code = await new Promise<number | null>((resolve) => run.once("exit", (c) => resolve(c)));
  lost = Number(readFileSync(out, "utf8"));
  expect(code).toBe(0);
  expect(lost).toBeGreaterThan(0);
  // The worker's exit sent it SIGKILL; it is gone once the kernel has acted on that (a zombie counts as gone).
  const pid = lost;
  await waitFor("the lost coordinator gone", () => (processAlive(pid) ? undefined : true), { timeoutMs: TEST_MS });
}, TEST_MS);
