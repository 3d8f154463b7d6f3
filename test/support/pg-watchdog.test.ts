import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterEach, expect, it } from "vitest";
import { waitFor } from "./farm-process.js";
import { processAlive } from "./process-alive.js";
import { makeTempDir, type TempDir } from "./temp-dir.js";

// A vitest run killed by a signal never runs its global teardown: the PostgreSQL cluster of
// pg-global-setup.ts must still go (pg-cluster.ts's watchdog), not idle on as an orphan.

const here = dirname(fileURLToPath(import.meta.url));
const vitestBin = join(dirname(createRequire(import.meta.url).resolve("vitest/package.json")), "vitest.mjs");
const started: number[] = [];
const TEST_MS = 300_000;
let dir: TempDir | undefined;

afterEach(async () => {
  for (const pid of started.splice(0)) if (processAlive(pid)) process.kill(pid, "SIGKILL");
  await dir?.remove();
});

it("stops and removes the run's PostgreSQL cluster when the vitest run is killed (SIGKILL)", async () => {
  dir = await makeTempDir("pg-watchdog");
  const out = join(dir.path, "run.json");
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("VITEST")));
  const run = spawn(process.execPath, [vitestBin, "run", "--config", join(here, "pg-watchdog-fixture", "vitest.config.ts")], {
    env: { ...env, FARM_PG_WATCHDOG_OUT: out },
    stdio: "ignore",
  });
  started.push(run.pid as number);
  const exited = new Promise<void>((resolve) => run.once("exit", () => resolve()));
  // Bounded by the test's own timeout only: a vitest run's start-up under load takes what it takes.
  const { pgUrl, workerPid } = await Promise.race([
    waitFor("the held run's cluster", () => existsSync(out) ? JSON.parse(readFileSync(out, "utf8")) as { pgUrl: string; workerPid: number } : undefined, { timeoutMs: TEST_MS }),
    exited.then(() => Promise.reject(new Error("the held vitest run exited before its test started"))),
  ]);
  started.push(workerPid);

  const client = new pg.Client({ connectionString: pgUrl });
  await client.connect();
  const data = String((await client.query<{ data_directory: string }>("SHOW data_directory")).rows[0]?.data_directory);
  await client.end();
  const postmaster = Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
  expect(processAlive(postmaster)).toBe(true);

  run.kill("SIGKILL");
  await exited;
  await waitFor("the cluster stopped and its dir removed", () => !processAlive(postmaster) && !existsSync(dirname(data)) ? true : undefined, { timeoutMs: TEST_MS });
}, TEST_MS + 10_000);
