/**
 * `farm standalone` as a single-machine user meets it: one process, and a
 * CLI that finds the coordinator and its admin token without any flags.
 */
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startAdbServer, startDevsim, type AdbServer, type Devsim } from "../devsim/index.js";
import { farm, farmProcess, startFarm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

let dir: TempDir;
let adb: AdbServer;
let sim: Devsim;
let standalone: FarmProcess;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  dir = await makeTempDir("standalone");
  adb = await startAdbServer();
  sim = await startDevsim({ devices: 2, adbPort: adb.port });
  // Only FARM_HOME and the adb port: no coordinator URL, no token.
  env = { FARM_HOME: join(dir.path, "home"), FARM_CONFIG: join(dir.path, "none.json"), ANDROID_ADB_SERVER_PORT: String(adb.port), FARM_COORDINATOR: "", FARM_TOKEN: "" };
  standalone = await startFarm(["standalone", "--listen", "127.0.0.1:0"], env);
});

afterAll(async () => {
  await standalone?.stop();
  await sim?.stop();
  await adb?.stop();
  await dir?.remove();
});

describe("farm standalone", () => {
  it("says in its agent's start line where adb's port came from: here ANDROID_ADB_SERVER_PORT", async () => {
    // stderr is its own pipe: the line may land after the ready line on stdout.
    const line = await waitFor("the agent's start line", () => standalone.stderr().split("\n").find((l) => l.includes("agent started")));
    expect(JSON.parse(line)).toMatchObject({ adb: `127.0.0.1:${adb.port}`, adbPortFrom: "ANDROID_ADB_SERVER_PORT" });
  });

  it("lists the phones through its coordinator with no flags", async () => {
    const list = await waitFor("both devices", async () => {
      const r = await farm(["devices"], env);
      const d = r.json["devices"] as { serial: string; state: string }[] | undefined;
      return d && d.length === 2 && d.every((x) => x.state === "device") ? d : undefined;
    });
    expect(list.map((d) => d.serial).sort()).toEqual(sim.devices.map((d) => d.serial).sort());
    const pretty = await farm(["devices", "--output", "pretty"], env);
    expect(pretty.stdout).toMatch(/^PHYSICAL\s+SERIAL\s+STATE\s+PLATFORM\s+MODEL/);
    for (const d of sim.devices) expect(pretty.stdout).toContain(d.serial);
  });

  it("keeps its admin token private", async () => {
    const s = await stat(join(dir.path, "home", "admin.token"));
    expect(s.mode & 0o777).toBe(0o600);
    expect((await stat(join(dir.path, "home"))).mode & 0o777).toBe(0o700);
  });

  it("refuses to listen beyond loopback", async () => {
    const r = await farmProcess(["standalone", "--listen", "0.0.0.0:0"], env);
    expect(r.code).toBe(64);
    expect(r.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "listen" });
  });
});

describe("farm CLI basics", () => {
  // The binary itself, on purpose (docs/testing.md): its version, its help, and a refusal's exit code.
  it("prints its version and help for every command", async () => {
    expect((await farmProcess(["--version"], env)).json).toMatchObject({ ok: true, version: expect.stringMatching(/^\d+\.\d+\.\d+$/) });
    const help = await farmProcess(["--help"], env);
    expect(help.code).toBe(0);
    for (const c of ["standalone", "coordinator", "agent", "agents", "devices", "token"]) {
      expect(help.stdout).toContain(c);
      const sub = await farm([c, "--help"], env);
      expect(sub.code).toBe(0);
      expect(sub.stdout).toMatch(/Usage: farm /);
    }
    expect((await farm(["token", "create", "--help"], env)).stdout).toContain("--kind");
  });

  it("fails with a stable code and the offending field", async () => {
    const unknown = await farmProcess(["nope"], env);
    expect(unknown.code).toBe(64);
    expect(unknown.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "command" });
    const badFlag = await farm(["devices", "--bogus"], env);
    expect(badFlag.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "bogus" });
    const badKind = await farm(["token", "create", "--kind", "robot", "--name", "x"], env);
    expect(badKind.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "kind" });
    const badOutput = await farm(["devices", "--output", "yaml"], env);
    expect(badOutput.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "output" });
    const pretty = await farm(["devices", "--bogus", "--output", "pretty"], env);
    expect(pretty.stderr).toMatch(/^error: .*\[INVALID_ARGUMENT, field bogus\]/);
    const down = await farm(["devices", "--coordinator", "http://127.0.0.1:1"], env);
    expect(down.json).toMatchObject({ ok: false, code: "COORDINATOR_UNAVAILABLE", field: "coordinator" });
  });
});
