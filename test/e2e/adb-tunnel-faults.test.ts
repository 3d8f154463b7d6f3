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
  });
});
