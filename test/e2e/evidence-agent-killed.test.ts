/**
 * A capture whose agent dies in flight, with coordinator and agent as
 * separate processes: the CLI fails, its directory gets no manifest, and the
 * coordinator's store lists no half-received bundle.
 */
import { randomUUID } from "node:crypto";
import { copyFile, mkdir, readFile, readdir, writeFile } from "node:fs/promises";
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
let agentArgs: string[];

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
  agentArgs = [
    "agent", "--coordinator", String(coordinator.ready["url"]), "--data-dir", join(dir.path, "agent"), "--token-file", join(dir.path, "agent.token"),
    "--adb-port", String(adb.port), "--no-adb-start", "--lock-dir", join(dir.path, "locks"),
  ];
  agent = await startFarm(agentArgs);
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

  it("uploads a whole bundle a dead agent left in staging once it is back", async () => {
    agent = await startFarm(agentArgs);
    await waitFor("the phone", async () => ((await farm(["devices", "--state", "device"], env)).json["devices"] as unknown[] | undefined)?.length === 1 ? true : undefined);
    const done = join(dir.path, "done");
    expect((await farm(["evidence", "capture", "--device", serial, "--output-dir", done], env)).code).toBe(0);
    await agent.stop();
    // A bundle staged but never uploaded: the same files under a new id.
    const id = randomUUID();
    const staged = join(dir.path, "agent", "staging", id);
    await mkdir(staged, { recursive: true, mode: 0o700 });
    for (const f of await readdir(done)) await copyFile(join(done, f), join(staged, f));
    const manifest = JSON.parse(await readFile(join(staged, "manifest.json"), "utf8")) as { evidenceId: string };
    manifest.evidenceId = id;
    await writeFile(join(staged, "manifest.json"), JSON.stringify(manifest));
    agent = await startFarm(agentArgs);
    await waitFor("the staged bundle in the store", async () =>
      ((await farm(["evidence", "list"], env)).json["bundles"] as { evidenceId: string }[]).some((b) => b.evidenceId === id) ? true : undefined,
    );
    await waitFor("the staged copy removed", async () => ((await readdir(join(dir.path, "agent", "staging"))).includes(id) ? undefined : true));
    const pulled = join(dir.path, "pulled");
    expect((await farm(["evidence", "pull", id, "--output-dir", pulled], env)).code).toBe(0);
    expect((await farm(["evidence", "verify", pulled], env)).code).toBe(0);
  });
});
