/**
 * Remote adb when things go away: `farm coordinator` and `farm agent` as
 * separate processes, `farm adb connect` in the background as users run it.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, runAdb, SimDevice, startAdbServer, type AdbServer } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

let lab: SplitFarm;
let user: AdbServer;
let phone: SimDevice;
let serial = "";

async function stateOf(local: string): Promise<string> {
  const r = await runAdb(user.port, ["devices"]);
  const line = r.stdout.split("\n").find((l) => l.startsWith(`${local}\t`));
  return line ? (line.split("\t")[1] ?? "").trim() : "gone";
}

const online = async () => ((((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string }[]).some((d) => d.serial === serial && d.state === "device") ? true : undefined);

beforeAll(async () => {
  lab = await startSplitFarm("adb-tunnel-faults");
  user = await startAdbServer();
  phone = new SimDevice({ serialno: "RTUNNELF1" });
  serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
  await waitFor("the phone online", online);
}, 120_000);

afterAll(async () => {
  await farm(["adb", "disconnect", "--all"], { ...lab?.env, ANDROID_ADB_SERVER_PORT: String(user?.port) }).catch(() => undefined);
  await user?.stop();
  await phone?.close();
  await lab?.stop();
});

describe("farm adb connect in the background", () => {
  it("opens on the lease's phone with only the lease, is listed, and disconnects cleanly", async () => {
    const r = await farm(["lease", "acquire", "--device", serial], lab.env);
    const token = (r.json["lease"] as { token: string }).token;
    const env = { ...lab.env, FARM_LEASE: token, ANDROID_ADB_SERVER_PORT: String(user.port) };
    const connected = await farm(["adb", "connect"], env);
    expect(connected.json, connected.stderr).toMatchObject({ ok: true, device: serial });
    const local = String(connected.json["serial"]);
    await waitFor("the tunnel in the user's adb", async () => ((await stateOf(local)) === "device" ? true : undefined));
    expect((await runAdb(user.port, ["-s", local, "shell", "echo", "bg"])).stdout.trim()).toBe("bg");
    const listed = await farm(["adb", "list"], env);
    expect(JSON.stringify(listed.json)).toContain(local);
    expect((await farm(["adb", "disconnect", "--all"], env)).json).toMatchObject({ ok: true });
    await waitFor("the tunnel gone from the user's adb", async () => ((await stateOf(local)) === "gone" ? true : undefined), { timeoutMs: 5_000 });
    expect(await readdir(join(String(lab.env["FARM_HOME"]), "adb-tunnels")).then((f) => f.filter((n) => n.endsWith(".json")))).toEqual([]);
    expect((await farm(["lease", "release"], env)).code).toBe(0);
  });

  it("closes within 2 s when the agent is killed, says why, and the phone leaves the user's adb", async () => {
    const r = await farm(["lease", "acquire", "--device", serial, "--ttl", "10m"], lab.env);
    const token = (r.json["lease"] as { token: string }).token;
    const env = { ...lab.env, FARM_LEASE: token, FARM_DEVICE: serial, ANDROID_ADB_SERVER_PORT: String(user.port) };
    const connected = await farm(["adb", "connect"], env);
    expect(connected.json, connected.stderr).toMatchObject({ ok: true });
    const local = String(connected.json["serial"]);
    const pid = Number(connected.json["pid"]);
    await waitFor("the tunnel in the user's adb", async () => ((await stateOf(local)) === "device" ? true : undefined));
    const killed = Date.now();
    lab.agent.kill("SIGKILL");
    await waitFor("the tunnel's process gone", () => {
      try {
        process.kill(pid, 0);
        return undefined;
      } catch {
        return true;
      }
    }, { timeoutMs: 5_000, intervalMs: 50 });
    expect(Date.now() - killed).toBeLessThan(2_500);
    await waitFor("the tunnel gone from the user's adb", async () => ((await stateOf(local)) === "gone" ? true : undefined), { timeoutMs: 5_000 });
    const logs = (await readdir(join(String(lab.env["FARM_HOME"]), "adb-tunnels"))).filter((n) => n.endsWith(".log"));
    const text = (await Promise.all(logs.map((n) => readFile(join(String(lab.env["FARM_HOME"]), "adb-tunnels", n), "utf8")))).join("\n");
    expect(text).toMatch(/AGENT_OFFLINE/);
    await lab.restartAgent();
    await waitFor("the phone back online", online);

    // The killed agent's tunnel left its raw-adb action unresolved; the lease's end settles it, so the next holder is not blocked.
    const left = await waitFor("the tunnel's action unresolved", () => rawAdbLeft(env, "unknown"));
    expect((await farm(["lease", "release"], env)).code).toBe(0);
    const settled = await waitFor("the tunnel's action settled by the lease's end", async () => {
      const a = (await ownershipOf(lab.env)).recent.find((r) => r.actionId === left.actionId);
      return a?.state === "abandoned" ? a : undefined;
    });
    expect(settled).toMatchObject({ kind: "raw-adb", abandonReason: "lease ended" });
    expect(settled.abandonedBy).toMatch(/released/);
    const next = (await farm(["lease", "acquire", "--device", serial], lab.env)).json["lease"] as { token: string };
    const nextEnv = { ...lab.env, FARM_LEASE: next.token, FARM_DEVICE: serial };
    expect((await farm(["shell", "--", "echo", "free"], nextEnv)).json).toMatchObject({ ok: true, stdout: "free\n" });
    expect((await farm(["lease", "release"], nextEnv)).code).toBe(0);
  });

  it("after a crash, the lease holder (not an admin) may abandon the tunnel's raw-adb action themselves, and nobody else", async () => {
    const alice = String((await farm(["token", "create", "--kind", "user", "--name", "alice", "--role", "operator"], lab.env)).json["token"]);
    const bob = String((await farm(["token", "create", "--kind", "user", "--name", "bob", "--role", "operator"], lab.env)).json["token"]);
    const r = await farm(["lease", "acquire", "--device", serial, "--ttl", "10m"], { ...lab.env, FARM_TOKEN: alice });
    const token = (r.json["lease"] as { token: string }).token;
    const env = { ...lab.env, FARM_TOKEN: alice, FARM_LEASE: token, FARM_DEVICE: serial, ANDROID_ADB_SERVER_PORT: String(user.port) };
    const connected = await farm(["adb", "connect"], env);
    expect(connected.json, connected.stderr).toMatchObject({ ok: true });
    const local = String(connected.json["serial"]);
    await waitFor("the tunnel in the user's adb", async () => ((await stateOf(local)) === "device" ? true : undefined));
    lab.agent.kill("SIGKILL");
    await waitFor("the tunnel gone from the user's adb", async () => ((await stateOf(local)) === "gone" ? true : undefined), { timeoutMs: 10_000 });
    await lab.restartAgent();
    await waitFor("the phone back online", online);
    const left = await waitFor("the tunnel's action unresolved", () => rawAdbLeft(env, "unknown"));
    // Blocked for its holder too, until settled.
    expect((await farm(["shell", "--", "echo", "x"], env)).json).toMatchObject({ ok: false, code: "DEVICE_OWNERSHIP_UNRESOLVED" });

    const abandon = ["device", "ownership", "abandon", "--action-id", left.actionId, "--reason", "my tunnel's agent crashed"];
    // Another operator, without the lease: refused before the agent.
    expect((await farm(abandon, { ...lab.env, FARM_TOKEN: bob, FARM_DEVICE: serial })).json).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER" });
    const done = await farm(abandon, env);
    expect(done.json, done.stderr).toMatchObject({ ok: true, action: { actionId: left.actionId, kind: "raw-adb", state: "abandoned", abandonedBy: "alice" } });
    await waitFor("the holder's farm change runs again", async () => {
      const x = await farm(["shell", "--", "echo", "back"], env);
      return x.json["ok"] === true ? x : undefined;
    });
    expect((await farm(["lease", "release"], env)).code).toBe(0);
  });
});

interface ActionJson {
  actionId: string;
  kind: string;
  state: string;
  abandonReason: string;
  abandonedBy: string;
}

async function ownershipOf(env: NodeJS.ProcessEnv): Promise<{ unresolved: ActionJson[]; recent: ActionJson[] }> {
  const r = await farm(["device", "ownership", "status", "--device", serial], env);
  return r.json["ownership"] as { unresolved: ActionJson[]; recent: ActionJson[] };
}

/** The phone's raw-adb action in this state, once the agent reports it so. */
async function rawAdbLeft(env: NodeJS.ProcessEnv, state: string): Promise<ActionJson | undefined> {
  return (await ownershipOf(env)).unresolved.find((a) => a.kind === "raw-adb" && a.state === state);
}
