import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { main } from "./main.js";

/**
 * A newcomer with nothing configured (no FARM_HOME, no coordinator, no token,
 * no standalone running): the error says no standalone was found and where
 * the CLI looked. Run in process; nothing is dispatched.
 */
const dir = mkdtempSync(join(tmpdir(), "farm-no-standalone-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

async function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ exitCode: number; json: Record<string, unknown> }> {
  let out = "";
  vi.spyOn(process.stdout, "write").mockImplementation((s: string | Uint8Array) => ((out += String(s)), true));
  const exitCode = await main([...args, "-o", "json"], env);
  vi.restoreAllMocks();
  return { exitCode, json: JSON.parse(out) as Record<string, unknown> };
}

describe("no coordinator configured and no standalone", () => {
  it("says no standalone was found and the path it looked at (FARM_HOME unset: the XDG data dir)", async () => {
    const env = { XDG_DATA_HOME: join(dir, "data"), FARM_CONFIG: join(dir, "none.json") };
    const { exitCode, json } = await run(["devices"], env);
    expect(exitCode).toBe(77);
    expect(json).toMatchObject({ ok: false, code: "UNAUTHENTICATED", field: "token" });
    const message = String(json["message"]);
    expect(message).toContain("no farm standalone found");
    expect(message).toContain(join(dir, "data", "farm", "standalone.json"));
    expect(message).toContain("FARM_HOME");
  });

  it("with FARM_HOME set, names that dir", async () => {
    const env = { FARM_HOME: join(dir, "home"), FARM_CONFIG: join(dir, "none.json") };
    const { json } = await run(["devices"], env);
    expect(String(json["message"])).toContain(join(dir, "home", "standalone.json"));
  });

  it("a configured coordinator without a token: no word about a standalone", async () => {
    const env = { FARM_HOME: join(dir, "home"), FARM_CONFIG: join(dir, "none.json"), FARM_COORDINATOR: "http://127.0.0.1:1" };
    const { json } = await run(["devices"], env);
    expect(json).toMatchObject({ code: "UNAUTHENTICATED" });
    expect(String(json["message"])).not.toContain("standalone found");
  });
});
