/**
 * The walking skeleton end to end, every part a real process: simulated
 * phones, the real adb server, `farm coordinator`, `farm agent`, the CLI.
 */
import { copyFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, adbDisconnect, SimDevice, startAdbServer, startDevsim, type AdbServer, type Devsim } from "../devsim/index.js";
import { farm, startFarm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

interface DeviceJson {
  serial: string;
  state: string;
  agentName: string;
  agentId: string;
  properties: { model: string; manufacturer: string; apiLevel: number; androidVersion: string; abi: string; serialno: string; bootId: string };
}
interface AgentJson {
  id: string;
  name: string;
  online: boolean;
  deviceCount: number;
}

const HEARTBEAT_MS = 300;

let dir: TempDir;
let adb: AdbServer;
let sim: Devsim;
let coordinator: FarmProcess;
let agent: FarmProcess;
let coordinatorListen: string;
let userEnv: NodeJS.ProcessEnv;
let agentArgs: string[];
const extraDevices: SimDevice[] = [];

async function devices(): Promise<DeviceJson[]> {
  const r = await farm(["devices"], userEnv);
  if (r.code !== 0) throw new Error(`farm devices failed: ${r.stdout}${r.stderr}`);
  return r.json["devices"] as DeviceJson[];
}

async function agents(): Promise<AgentJson[]> {
  const r = await farm(["agents"], userEnv);
  if (r.code !== 0) throw new Error(`farm agents failed: ${r.stdout}${r.stderr}`);
  return r.json["agents"] as AgentJson[];
}

/** Waits until `farm devices` satisfies the predicate, returning the list. */
function devicesWhen(what: string, ok: (d: DeviceJson[]) => boolean, timeoutMs = 15_000): Promise<DeviceJson[]> {
  return waitFor(what, async () => {
    const d = await devices();
    return ok(d) ? d : undefined;
  }, { timeoutMs });
}

const simSerials = () => sim.devices.map((d) => d.serial).sort();

beforeAll(async () => {
  dir = await makeTempDir("e2e");
  adb = await startAdbServer();
  sim = await startDevsim({ devices: 2, adbPort: adb.port });
  coordinator = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", join(dir.path, "coordinator")]);
  const url = coordinator.ready["url"] as string;
  coordinatorListen = new URL(url).host;
  const admin = (await readFile(coordinator.ready["adminTokenFile"] as string, "utf8")).trim();
  // FARM_HOME points at an empty dir so no local standalone is picked up.
  userEnv = { FARM_COORDINATOR: url, FARM_TOKEN: admin, FARM_HOME: join(dir.path, "home"), FARM_CONFIG: join(dir.path, "none.json") };
  const created = await farm(["token", "create", "--kind", "agent", "--name", "lab-1"], userEnv);
  expect(created.code).toBe(0);
  const tokenFile = join(dir.path, "agent.token");
  await writeFile(tokenFile, String(created.json["token"]), { mode: 0o600 });
  agentArgs = [
    "agent",
    "--coordinator",
    url,
    "--data-dir",
    join(dir.path, "agent"),
    "--token-file",
    tokenFile,
    "--name",
    "lab-1",
    "--adb-port",
    String(adb.port),
    "--heartbeat-interval",
    String(HEARTBEAT_MS),
    "--no-adb-start",
  ];
  agent = await startFarm(agentArgs);
});

afterAll(async () => {
  await agent?.stop();
  await coordinator?.stop();
  for (const d of extraDevices) await d.close();
  await sim?.stop();
  await adb?.stop();
  await dir?.remove();
});

describe("walking skeleton", () => {
  it("lists the simulated phones through the coordinator with their properties", async () => {
    const list = await devicesWhen("two devices with properties", (d) => d.length === 2 && d.every((x) => x.state === "device" && x.properties.bootId !== ""));
    expect(list.map((d) => d.serial)).toEqual(simSerials());
    for (const d of list) {
      const simDevice = sim.devices.find((s) => s.serial === d.serial)?.device;
      expect(simDevice).toBeDefined();
      if (!simDevice) continue;
      expect(d.agentName).toBe("lab-1");
      expect(d.properties.model).toBe(simDevice.model);
      expect(d.properties.serialno).toBe(simDevice.serialno);
      expect(d.properties.manufacturer).toBe(simDevice.props["ro.product.manufacturer"]);
      expect(d.properties.apiLevel).toBe(Number(simDevice.props["ro.build.version.sdk"]));
      expect(d.properties.androidVersion).toBe(simDevice.props["ro.build.version.release"]);
      expect(d.properties.abi).toBe(simDevice.props["ro.product.cpu.abi"]);
      expect(d.properties.bootId).toBe(simDevice.bootId);
    }
    const a = await agents();
    expect(a).toHaveLength(1);
    expect(a[0]).toMatchObject({ name: "lab-1", online: true, deviceCount: 2, id: agent.ready["agentId"] });
  });

  it("shows a newly connected device and drops one removed from adb", async () => {
    const extra = new SimDevice({ serialno: "EXTRA0001", props: { "ro.product.model": "Extra Phone" } });
    extraDevices.push(extra);
    const port = await extra.listen();
    const serial = await adbConnect(adb.port, "127.0.0.1", port);
    const withExtra = await devicesWhen("the new device", (d) => d.some((x) => x.serial === serial && x.properties.model === "Extra Phone"));
    expect(withExtra).toHaveLength(3);
    await adbDisconnect(adb.port, "127.0.0.1", port);
    const after = await devicesWhen("the removed device to disappear", (d) => !d.some((x) => x.serial === serial));
    expect(after.map((d) => d.serial)).toEqual(simSerials());
  });

  it("turns a frozen agent's devices agent-offline within the heartbeat window, and back", async () => {
    agent.kill("SIGSTOP");
    const t0 = Date.now();
    try {
      const offline = await devicesWhen("agent-offline after missed heartbeats", (d) => d.length === 2 && d.every((x) => x.state === "agent-offline"), 10_000);
      expect(offline.map((d) => d.serial)).toEqual(simSerials());
      // 3 missed intervals plus the sweep period and one CLI round trip.
      expect(Date.now() - t0).toBeLessThan(3 * HEARTBEAT_MS + 5_000);
      expect((await agents())[0]?.online).toBe(false);
    } finally {
      agent.kill("SIGCONT");
    }
    await devicesWhen("devices back after the agent thaws", (d) => d.length === 2 && d.every((x) => x.state === "device"));
  });

  it("lists the stored devices agent-offline after the coordinator is killed and restarted, then re-attaches the agent", async () => {
    const before = await devicesWhen("both devices online", (d) => d.length === 2 && d.every((x) => x.state === "device"));
    // Frozen, the agent cannot re-attach before the restarted coordinator is asked.
    agent.kill("SIGSTOP");
    try {
      coordinator.kill("SIGKILL");
      await coordinator.exited;
      coordinator = await startFarm(["coordinator", "--listen", coordinatorListen, "--data-dir", join(dir.path, "coordinator")]);
      const stored = await devices();
      expect(stored.map((d) => d.serial)).toEqual(simSerials());
      for (const b of before) {
        const a = stored.find((d) => d.serial === b.serial);
        expect(a?.state, b.serial).toBe("agent-offline");
        expect(a?.agentName, b.serial).toBe("lab-1");
        expect(a?.properties, b.serial).toEqual(b.properties);
      }
      expect((await agents())[0]).toMatchObject({ online: false, deviceCount: 2, id: agent.ready["agentId"] });
    } finally {
      agent.kill("SIGCONT");
    }
    const list = await devicesWhen("devices online again", (d) => d.length === 2 && d.every((x) => x.state === "device"), 30_000);
    expect(list.map((d) => d.serial)).toEqual(simSerials());
    const a = await agents();
    expect(a).toHaveLength(1);
    expect(a[0]).toMatchObject({ online: true, id: agent.ready["agentId"] });
  });

  it("marks devices agent-offline when the agent dies and restores them when it restarts with the same id", async () => {
    agent.kill("SIGKILL");
    await agent.exited;
    await devicesWhen("agent-offline after the agent died", (d) => d.length === 2 && d.every((x) => x.state === "agent-offline"));
    agent = await startFarm(agentArgs);
    await devicesWhen("devices back after agent restart", (d) => d.length === 2 && d.every((x) => x.state === "device"));
    const a = await agents();
    expect(a).toHaveLength(1);
    expect(a[0]?.id).toBe(agent.ready["agentId"]);
  });

  it("says in its start line where adb's port came from: here the flag", async () => {
    // stderr is its own pipe: the line may land after the ready line on stdout.
    const line = await waitFor("the agent's start line", () => agent.stderr().split("\n").find((l) => l.includes("agent started")));
    expect(JSON.parse(line)).toMatchObject({ adb: `127.0.0.1:${adb.port}`, adbPortFrom: "--adb-port" });
  });

  it("refuses a second agent that presents an attached agent's id", async () => {
    // Another host with a copy of this agent's identity (its own data dir:
    // one data dir is only ever used by one agent process).
    const otherDir = join(dir.path, "agent-copy");
    await mkdir(otherDir, { mode: 0o700 });
    await copyFile(join(dir.path, "agent", "agent.json"), join(otherDir, "agent.json"));
    const dataDirAt = agentArgs.indexOf("--data-dir") + 1;
    const second = await startFarm(agentArgs.map((a, i) => (i === dataDirAt ? otherDir : a)));
    try {
      await waitFor("the second agent to be refused", () => (/AGENT_ALREADY_ATTACHED/.test(second.stderr()) ? true : undefined));
      const a = await agents();
      expect(a).toHaveLength(1);
      expect(a[0]?.online).toBe(true);
      expect((await devices()).every((d) => d.state === "device")).toBe(true);
    } finally {
      await second.stop();
    }
  });

  it("survives an adb server restart: tracking comes back and devices are re-reported", async () => {
    const port = adb.port;
    await adb.stop();
    // A new adb server forgets every `adb connect` device.
    adb = await startAdbServer({ port });
    await devicesWhen("devices gone with the old adb server", (d) => d.length === 0);
    for (const d of sim.devices) await adbConnect(adb.port, "127.0.0.1", d.port);
    const list = await devicesWhen("devices re-reported", (d) => d.length === 2 && d.every((x) => x.state === "device" && x.properties.model !== ""));
    expect(list.map((d) => d.serial)).toEqual(simSerials());
  });

  it("token create prints the export line to paste, like lease acquire does", async () => {
    const user = await farm(["token", "create", "--kind", "user", "--name", "pasted", "--output", "pretty"], userEnv);
    expect(user.code, user.stderr).toBe(0);
    const line = user.stdout.trim().split("\n").at(-1) ?? "";
    expect(line).toMatch(/^export FARM_TOKEN=\S+$/);
    // The pasted value is the token: it works as FARM_TOKEN.
    const pasted = line.slice("export FARM_TOKEN=".length);
    expect((await farm(["devices"], { ...userEnv, FARM_TOKEN: pasted })).code).toBe(0);
    const agent = await farm(["token", "create", "--kind", "agent", "--name", "pasted-agent", "--output", "pretty"], userEnv);
    expect(agent.stdout.trim().split("\n").at(-1)).toMatch(/^export FARM_AGENT_TOKEN=\S+$/);
    // JSON keeps its shape: the token and its info.
    const json = await farm(["token", "create", "--kind", "user", "--name", "pasted-json"], userEnv);
    expect(Object.keys(json.json).sort()).toEqual(["info", "ok", "token"]);
  });

  it("refuses user calls without a token, with a revoked token, or with an agent token", async () => {
    const base = { ...userEnv };
    const noToken = await farm(["devices"], { ...base, FARM_TOKEN: "" });
    expect(noToken.code).toBe(77);
    expect(noToken.json).toMatchObject({ ok: false, code: "UNAUTHENTICATED", field: "token" });
    const raw = await fetch(`${base["FARM_COORDINATOR"]}/farm.v1.RegistryService/ListDevices`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(raw.status).toBe(401);

    const created = await farm(["token", "create", "--kind", "user", "--name", "temp-user"], base);
    const userToken = String(created.json["token"]);
    expect((await farm(["devices"], { ...base, FARM_TOKEN: userToken })).code).toBe(0);
    expect((await farm(["token", "revoke", "temp-user"], base)).code).toBe(0);
    const revoked = await farm(["devices"], { ...base, FARM_TOKEN: userToken });
    expect(revoked.json).toMatchObject({ ok: false, code: "UNAUTHENTICATED", message: "token has been revoked" });

    const agentToken = (await readFile(join(dir.path, "agent.token"), "utf8")).trim();
    const wrongKind = await farm(["devices"], { ...base, FARM_TOKEN: agentToken });
    expect(wrongKind.code).toBe(77);
    expect(wrongKind.json).toMatchObject({ ok: false, code: "PERMISSION_DENIED" });
    // And a plain user token cannot manage tokens.
    const other = await farm(["token", "create", "--kind", "user", "--name", "plain"], base);
    const denied = await farm(["token", "list"], { ...base, FARM_TOKEN: String(other.json["token"]) });
    expect(denied.json).toMatchObject({ ok: false, code: "PERMISSION_DENIED" });
    // Secrets never reach the coordinator's log.
    expect(coordinator.stderr()).not.toContain(userToken);
    expect(coordinator.stderr()).not.toContain(agentToken);
  });
});
