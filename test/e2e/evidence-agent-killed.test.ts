/**
 * A capture whose agent dies in flight, with coordinator and agent as
 * separate processes: the CLI fails, its directory gets no manifest, and the
 * coordinator's store lists no half-received bundle.
 */
import { readFile, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, SimDevice, startAdbServer, type AdbServer } from "../devsim/index.js";
import { farm, startFarm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

let dir: TempDir;
let adb: AdbServer;
let coordinator: FarmProcess;
let agent: FarmProcess;
let phone: SimDevice;
let serial: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  dir = await makeTempDir("evidence-agent");
  adb = await startAdbServer();
  phone = new SimDevice({ serialno: "KILLAGENT1" });
  serial = await adbConnect(adb.port, "127.0.0.1", await phone.listen());
  coordinator = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", join(dir.path, "coordinator")]);
  const admin = (await readFile(String(coordinator.ready["adminTokenFile"]), "utf8")).trim();
  env = { FARM_COORDINATOR: String(coordinator.ready["url"]), FARM_TOKEN: admin, FARM_HOME: join(dir.path, "home"), FARM_CONFIG: join(dir.path, "none.json") };
  const token = await farm(["token", "create", "--kind", "agent", "--name", "lab"], env);
  await writeFile(join(dir.path, "agent.token"), String(token.json["token"]), { mode: 0o600 });
  agent = await startFarm([
    "agent", "--coordinator", String(coordinator.ready["url"]), "--data-dir", join(dir.path, "agent"), "--token-file", join(dir.path, "agent.token"),
    "--adb-port", String(adb.port), "--no-adb-start", "--lock-dir", join(dir.path, "locks"),
  ]);
  await waitFor("the phone", async () => ((await farm(["devices"], env)).json["devices"] as { serial: string; properties: { physicalId: string } }[] | undefined)?.some((d) => d.serial === serial && d.properties.physicalId) ? true : undefined);
});

afterAll(async () => {
  await agent?.stop();
  await coordinator?.stop();
  await phone?.close();
  await adb?.stop();
  await dir?.remove();
});

describe("agent killed during a capture", () => {
  it("fails the CLI, writes no manifest and stores nothing half-done", async () => {
    phone.faults.set({ bandwidthBytesPerSec: 60_000 });
    const out = join(dir.path, "bundle");
    const pending = farm(["evidence", "capture", "--device", serial, "--output-dir", out, "--timeout", "30000"], env);
    await new Promise((r) => setTimeout(r, 1_500));
    agent.kill("SIGKILL");
    const r = await pending;
    expect(r.code).toBe(1);
    expect(r.json).toMatchObject({ ok: false, code: "AGENT_OFFLINE" });
    expect(await readdir(out)).not.toContain("manifest.json");
    const list = await farm(["evidence", "list"], env);
    expect(list.json["bundles"]).toEqual([]);
    const incoming = await readdir(join(dir.path, "coordinator", "evidence", ".incoming"));
    expect(incoming).toEqual([]);
    phone.faults.set({ bandwidthBytesPerSec: null });
  });
});
