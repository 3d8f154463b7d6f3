import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { hostRequest } from "./host-client.js";
import { waitUntil } from "./wait-until.js";

// A test file that loses the adb server it started (its test timed out before stop(), or threw) must not
// leave it running: vitest ends a file's worker with a signal, so no "exit" handler of the worker runs.

const here = dirname(fileURLToPath(import.meta.url));
const vitestBin = join(dirname(createRequire(import.meta.url).resolve("vitest/package.json")), "vitest.mjs");
const TEST_MS = 300_000;
let dir: string | undefined;
let lost: number | undefined;

afterEach(() => {
  if (lost !== undefined && alive(lost)) process.kill(lost, "SIGKILL");
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function alive(pid: number): boolean {
  try {
    // A zombie (killed, not yet reaped by its exited parent's reaper) counts as gone.
    return readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "")[0] !== "Z";
  } catch {
    return false;
  }
}

it("stops an adb server its test file lost when the file's worker exits", async () => {
  dir = mkdtempSync(join(tmpdir(), "devsim-leak-"));
  const out = join(dir, "server.json");
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("VITEST")));
  const run = spawn(process.execPath, [vitestBin, "run", "--config", join(here, "leak-fixture", "vitest.config.ts")], { env: { ...env, DEVSIM_LEAK_OUT: out }, stdio: "ignore" });
  const code = await new Promise<number | null>((resolve) => run.once("exit", (c) => resolve(c)));
  const server = JSON.parse(readFileSync(out, "utf8")) as { pid: number; port: number };
  lost = server.pid;
  expect(code).toBe(0);
  expect(server.pid).toBeGreaterThan(0);
  const pid = server.pid;
  await waitUntil(() => !alive(pid), { timeoutMs: TEST_MS, what: "the lost adb server gone" });
  // Nothing answers on its port any more.
  await expect(hostRequest(server.port, "host:version")).rejects.toThrow();
}, TEST_MS);
