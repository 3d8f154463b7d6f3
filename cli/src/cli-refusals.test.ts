import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { refusalReport } from "@farm/shared/error-codes";
import { main } from "./main.js";

/**
 * Every refusal the CLI makes before sending anything prints the one
 * pre-dispatch envelope (refusalReport): dispatched false, ambiguous false,
 * whatever the command. Run in process; no coordinator or device is touched
 * (the coordinator address is a closed port: reaching it would fail otherwise).
 */
let dir: string;
let env: NodeJS.ProcessEnv;
let manifest: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "farm-refusals-"));
  env = { FARM_HOME: join(dir, "home"), FARM_CONFIG: join(dir, "none.json"), FARM_COORDINATOR: "http://127.0.0.1:1", FARM_TOKEN: "farmu_test" };
  // A video bundle started with --output-dir on phone "a".
  mkdirSync(join(dir, "bundle"));
  manifest = join(dir, "bundle", "manifest.json");
  writeFileSync(manifest, JSON.stringify({ kind: "video", evidenceId: "0b6f6a0e-7d35-4c8e-9d1e-2f1f4f0c2a11", device: { serial: "a" } }));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

async function run(args: string[]): Promise<{ exitCode: number; json: Record<string, unknown> }> {
  let out = "";
  vi.spyOn(process.stdout, "write").mockImplementation((s: string | Uint8Array) => ((out += String(s)), true));
  const exitCode = await main([...args, "-o", "json"], env);
  vi.restoreAllMocks();
  return { exitCode, json: JSON.parse(out) as Record<string, unknown> };
}

describe("CLI-side refusals", () => {
  const paths: [string, string[], string][] = [
    ["a duplicate flag on a device change", ["shell", "--device", "a", "--device", "b", "--", "echo"], "device"],
    ["a duplicate flag on a read", ["devices", "--agent", "x", "--agent", "y"], "agent"],
    ["--timeout out of range", ["devices", "--timeout", "5"], "timeout"],
    ["--timeout out of range on a device change", ["shell", "--device", "a", "--timeout", "99999999", "--", "echo"], "timeout"],
    ["--duration-seconds out of range", ["evidence", "video", "start", "--device", "a", "--duration-seconds", "999", join(tmpdir(), "farm-refusals-never")], "duration-seconds"],
    ["an unknown flag", ["devices", "--bogus"], "bogus"],
    ["an unknown flag on a device change", ["input", "--device", "a", "--bogus", "tap", "1", "2"], "bogus"],
    ["a --device that conflicts with the session's phone", ["evidence", "video", "status", "--session", "MANIFEST", "--device", "b"], "device"],
    ["--ttl beyond what a lease may last", ["lease", "acquire", "--ttl", "100000h"], "ttl"],
    ["--ttl below a second", ["lease", "renew", "--lease", "farml_x", "--ttl", "10ms"], "ttl"],
    ["--wait beyond a day", ["lease", "acquire", "--wait", "25h"], "wait"],
    ["an unknown command", ["devcies"], "command"],
    ["a missing argument", ["evidence", "verify"], "bundle-dir"],
    // Checked before the agent opens its database or reaches the coordinator.
    ["an agent budget of zero bytes", ["agent", "run", "--coordinator", "http://127.0.0.1:1", "--adb-tunnel-budget", "0"], "adb-tunnel-budget"],
    ["an agent budget that is not a size", ["agent", "run", "--coordinator", "http://127.0.0.1:1", "--adb-agent-budget", "lots"], "adb-agent-budget"],
  ];

  it.each(paths)("%s: the pre-dispatch envelope, exit 64 (usage)", async (_name, args, field) => {
    const { exitCode, json } = await run(args.map((a) => (a === "MANIFEST" ? manifest : a)));
    expect(exitCode).toBe(64);
    expect(json).toEqual(refusalReport("INVALID_ARGUMENT", json["message"] as string, field));
    expect(json).toMatchObject({ dispatched: false, ambiguous: false });
  });

  it("names the range of --ttl, not an encoder's complaint", async () => {
    const { json } = await run(["lease", "acquire", "--ttl", "100000h"]);
    expect(json["message"]).toBe("--ttl must be within 1s..24h, got 100000h");
  });
});
