/**
 * A capture whose agent dies in flight, with coordinator and agent as
 * separate processes: the CLI fails, its directory gets no manifest, and the
 * coordinator's store lists no half-received bundle.
 */
import { copyFile, mkdir, readFile, readdir, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, SimDevice, type AdbServer } from "../devsim/index.js";
import { farm, startFarm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";
import type { TempDir } from "../support/temp-dir.js";

let dir: TempDir;
let adb: AdbServer;
let lab: SplitFarm;
let agent: FarmProcess;
let phone: SimDevice;
let serial: string;
let env: NodeJS.ProcessEnv;
let agentArgs: string[];

beforeAll(async () => {
  lab = await startSplitFarm("evidence-agent");
  ({ dir, adb, env, agentArgs, agent } = lab);
  phone = new SimDevice({ serialno: "KILLAGENT1" });
  serial = await adbConnect(adb.port, "127.0.0.1", await phone.listen());
  await waitFor(
    "the phone",
    async () => ((await farm(["devices"], env)).json["devices"] as { serial: string; properties: { physicalId: string } }[] | undefined)?.some((d) => d.serial === serial && d.properties.physicalId) ? true : undefined,
  );
});

afterAll(async () => {
  // The agent may have been restarted by a test: stop that one too.
  await agent?.stop();
  await phone?.close();
  await lab?.stop();
});

describe("agent killed during a capture", () => {
  it("fails the CLI, writes no manifest and stores nothing half-done", async () => {
    phone.faults.set({ bandwidthBytesPerSec: 60_000 });
    const out = join(dir.path, "bundle");
    const pending = farm(["evidence", "capture", "--device", serial, "--output-dir", out, "--timeout", "30000"], env);
    // Kill it once the capture is under way on the agent (its staging dir has the bundle's directory).
    await waitFor("the capture in flight", async () => ((await readdir(join(dir.path, "agent", "staging")).catch(() => [])).length > 0 ? true : undefined));
    agent.kill("SIGKILL");
    const r = await pending;
    expect(r.code).toBe(69);
    expect(r.json).toMatchObject({ ok: false, code: "AGENT_OFFLINE" });
    // The CLI claims the directory only once the bundle exists: none was made.
    expect(existsSync(out)).toBe(false);
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
    // The restarted agent serves the phone once its adb watcher has it again, which can be a moment after the
    // coordinator lists it: a refusal then is DEVICE_OFFLINE before anything is sent or written, so ask again.
    const captured = await waitFor("a capture through the restarted agent", async () => {
      const r = await farm(["evidence", "capture", "--device", serial, "--output-dir", done], env);
      return r.json["code"] === "DEVICE_OFFLINE" && r.json["dispatched"] === false && !existsSync(done) ? undefined : r;
    });
    expect(captured.code, JSON.stringify(captured.json)).toBe(0);
    await agent.stop();
    // A bundle staged but never uploaded: the same files under the id the coordinator
    // issued to the capture killed above (an agent may upload only ids it was issued).
    const id = (await readdir(join(dir.path, "agent", "staging"))).find((n) => /^[0-9a-f-]{36}$/.test(n)) as string;
    expect(id).toBeDefined();
    const staged = join(dir.path, "agent", "staging", id);
    await mkdir(staged, { recursive: true, mode: 0o700 });
    for (const f of await readdir(done)) await copyFile(join(done, f), join(staged, f));
    const manifest = JSON.parse(await readFile(join(staged, "manifest.json"), "utf8")) as { evidenceId: string };
    manifest.evidenceId = id;
    await writeFile(join(staged, "manifest.json"), JSON.stringify(manifest));
    agent = await startFarm(agentArgs);
    await waitFor("the staged bundle in the store", async () => ((await farm(["evidence", "list"], env)).json["bundles"] as { evidenceId: string }[]).some((b) => b.evidenceId === id) ? true : undefined);
    await waitFor("the staged copy removed", async () => ((await readdir(join(dir.path, "agent", "staging"))).includes(id) ? undefined : true));
    const pulled = join(dir.path, "pulled");
    expect((await farm(["evidence", "pull", id, "--output-dir", pulled], env)).code).toBe(0);
    expect((await farm(["evidence", "verify", pulled], env)).code).toBe(0);
  });
});
