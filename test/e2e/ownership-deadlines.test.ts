/**
 * Ownership under deadlines, restarts and several agents per host, with
 * real processes: one adb server and one lock dir shared by three agents
 * (two on one coordinator, one on a coordinator of its own), simulated
 * phones with faults, and the CLI.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, SimDevice } from "../devsim/index.js";
import { farm, startFarm, waitFor, type CliResult, type FarmProcess } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

let lab: SplitFarm;
/** A second agent on the first coordinator (same host, same lock dir, own data dir). */
let agentC: FarmProcess;
/** A coordinator of its own, and its agent on this same host. */
let coordinator2: FarmProcess;
let agentB: FarmProcess;
let env2: NodeJS.ProcessEnv;
const phones: SimDevice[] = [];

interface DeviceJson {
  serial: string;
  agentName: string;
  state: string;
  properties: { physicalId: string; unresolvedActionIds?: string[] };
}

async function agentProcess(name: string, url: string, adminEnv: NodeJS.ProcessEnv): Promise<FarmProcess> {
  const token = await farm(["token", "create", "--kind", "agent", "--name", name], adminEnv);
  const tokenFile = join(lab.dir.path, `${name}.token`);
  await writeFile(tokenFile, String(token.json["token"]), { mode: 0o600 });
  return startFarm([
    "agent",
    "--coordinator",
    url,
    "--name",
    name,
    "--data-dir",
    join(lab.dir.path, name),
    "--token-file",
    tokenFile,
    "--adb-port",
    String(lab.adb.port),
    "--no-adb-start",
    "--lock-dir",
    join(lab.dir.path, "locks"),
    "--heartbeat-interval",
    "500",
  ]);
}

/** A phone on the shared adb server, once every named agent (on its coordinator) lists it with its identity. */
async function phone(opts: ConstructorParameters<typeof SimDevice>[0], seenBy: { env: NodeJS.ProcessEnv; agents: string[] }[]): Promise<{ device: SimDevice; serial: string; physicalId: string }> {
  const device = new SimDevice(opts);
  phones.push(device);
  const serial = await adbConnect(lab.adb.port, "127.0.0.1", await device.listen());
  let physicalId = "";
  for (const { env, agents } of seenBy) {
    // Agents sharing an adb server see one phone: all but the first to report it are
    // quarantined until an admin accepts the alias (a no-op for the first).
    await waitFor(`${serial} reported by ${agents.join(", ")}`, async () => {
      const list = (await farm(["devices"], env)).json["devices"] as DeviceJson[];
      return agents.every((a) => list.some((d) => d.serial === serial && d.agentName === a && d.properties.physicalId)) ? true : undefined;
    });
    for (const a of agents) await farm(["device", "alias", "accept", "--device", serial, "--agent", a], env);
    await waitFor(`${serial} on ${agents.join(", ")}`, async () => {
      const list = (await farm(["devices"], env)).json["devices"] as DeviceJson[];
      const mine = list.filter((d) => d.serial === serial && d.state === "device" && d.properties.physicalId);
      physicalId = mine[0]?.properties.physicalId ?? "";
      return agents.every((a) => mine.some((d) => d.agentName === a)) ? true : undefined;
    });
  }
  return { device, serial, physicalId };
}

async function lease(serial: string, env: NodeJS.ProcessEnv, agent?: string): Promise<NodeJS.ProcessEnv> {
  const r = await farm(["lease", "acquire", "--device", serial, ...(agent ? ["--agent", agent] : []), "--ttl", "10m", "--wait", "30s"], env);
  if (r.code !== 0) throw new Error(`lease: ${r.stdout}${r.stderr}`);
  return { ...env, FARM_LEASE: String((r.json["lease"] as { token: string }).token) };
}

async function ownership(serial: string, env: NodeJS.ProcessEnv, agent: string): Promise<{ locked: boolean; unresolved: { actionId: string; state: string; dispatched?: boolean; ambiguous: boolean; progressJson?: string }[] }> {
  const r = await farm(["device", "ownership", "status", "--device", serial, "--agent", agent], env);
  if (r.json["ok"] !== true) throw new Error(`ownership status: ${r.stdout}`);
  return r.json["ownership"] as Awaited<ReturnType<typeof ownership>>;
}

function expectTimeoutWithAction(r: CliResult, dispatched: boolean | null): string {
  expect(r.json).toMatchObject({ ok: false, code: "COMMAND_TIMEOUT", dispatched, ambiguous: true });
  expect(String(r.json["actionId"])).toMatch(/^[0-9a-f-]{36}$/);
  return String(r.json["actionId"]);
}

beforeAll(async () => {
  lab = await startSplitFarm("own-deadlines", { agentName: "lab-a" });
  agentC = await agentProcess("lab-c", lab.url, lab.env);
  coordinator2 = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", join(lab.dir.path, "coordinator2")]);
  const admin2 = (await readFile(String(coordinator2.ready["adminTokenFile"]), "utf8")).trim();
  env2 = { ...lab.env, FARM_COORDINATOR: String(coordinator2.ready["url"]), FARM_TOKEN: admin2 };
  agentB = await agentProcess("lab-b", String(coordinator2.ready["url"]), env2);
});

afterAll(async () => {
  await agentB?.stop();
  await coordinator2?.stop();
  await agentC?.stop();
  for (const p of phones) await p.close();
  await lab?.stop();
});

describe("unresolved means unresolved for the whole host", () => {
  it("blocks a phone for every agent sharing the lock dir, and at the coordinator for every agent reporting it", async () => {
    const p = await phone({ serialno: "HOSTWIDE01" }, [{ env: lab.env, agents: ["lab-a", "lab-c"] }, { env: env2, agents: ["lab-b"] }]);
    const leased = await lease(p.serial, lab.env, "lab-a");
    // The phone takes the shell stream and never answers: the action's outcome is unknown.
    p.device.faults.set({ hangServices: ["shell,"] });
    const lost = await farm(["device", "setprop", "--device", p.serial, "--agent", "lab-a", "--timeout", "2000", "persist.farm.hw", "1"], leased);
    const actionId = expectTimeoutWithAction(lost, null);
    p.device.faults.clear();

    // Agent B has its own data dir and its own coordinator: only the host journal can stop it.
    const leasedB = await lease(p.serial, env2);
    const viaB = await farm(["device", "setprop", "--device", p.serial, "persist.farm.hw", "2"], leasedB);
    expect(viaB.json).toMatchObject({ ok: false, code: "DEVICE_OWNERSHIP_UNRESOLVED", dispatched: false, ambiguous: false, actionId });
    expect(String(viaB.json["message"])).toContain(actionId);
    expect(p.device.getProp("persist.farm.hw")).toBeUndefined();
    const statusB = await ownership(p.serial, env2, "lab-b");
    expect(statusB.unresolved).toEqual([expect.objectContaining({ actionId, state: "unknown", ambiguous: true })]);

    // The first coordinator refuses through agent C before dispatching: A reported the action.
    await waitFor("the unresolved action in A's report", async () => {
      const list = (await farm(["devices"], lab.env)).json["devices"] as DeviceJson[];
      return list.some((d) => d.serial === p.serial && d.agentName === "lab-a" && d.properties.unresolvedActionIds?.includes(actionId)) ? true : undefined;
    });
    const viaC = await farm(["device", "shell", "--device", p.serial, "--agent", "lab-c", "--", "echo", "x"], leased);
    expect(viaC.json).toMatchObject({ ok: false, code: "DEVICE_OWNERSHIP_UNRESOLVED", dispatched: false, ambiguous: false, actionId });
    expect(String(viaC.json["message"])).toContain("lab-a");
    // Any alias, any agent of the host shows it.
    expect((await ownership(p.serial, lab.env, "lab-c")).unresolved.map((a) => a.actionId)).toEqual([actionId]);

    // The job never started (the stream hung before it), so nothing can prove it: an admin abandons it.
    const reconciled = await farm(["device", "ownership", "reconcile", "--device", p.serial, "--agent", "lab-c"], lab.env);
    expect(reconciled.json["unresolved"]).toEqual([expect.objectContaining({ actionId })]);
    const abandoned = await farm(["device", "ownership", "abandon", "--device", p.serial, "--agent", "lab-b", "--action-id", actionId, "--reason", "hung stream, test"], env2);
    expect(abandoned.code).toBe(0);
    // From every agent reporting the phone (A and C report it to this coordinator, each on its own schedule).
    await waitFor("the coordinator to hear the action is gone", async () => {
      const rows = ((await farm(["devices"], lab.env)).json["devices"] as DeviceJson[]).filter((d) => d.serial === p.serial);
      return ["lab-a", "lab-c"].every((a) => rows.some((d) => d.agentName === a)) && rows.every((d) => (d.properties.unresolvedActionIds ?? []).length === 0) ? true : undefined;
    });
    const ok = await farm(["device", "setprop", "--device", p.serial, "--agent", "lab-c", "persist.farm.hw", "3"], leased);
    expect(ok.json, ok.stdout).toMatchObject({ ok: true, dispatched: true, ambiguous: false });
    expect(p.device.getProp("persist.farm.hw")).toBe("3");
  });
});

describe("every dispatch obeys its deadline and releases its lock", () => {
  it("a reboot the phone accepts and never finishes: lock free after the deadline, journal ambiguous, a later reboot proves nothing", async () => {
    const p = await phone({ serialno: "HUNGREBOOT" }, [{ env: lab.env, agents: ["lab-a"] }]);
    const leased = await lease(p.serial, lab.env, "lab-a");
    p.device.faults.set({ hangServices: ["reboot:"] });
    const t0 = Date.now();
    const r = await farm(["reboot", "--device", p.serial, "--agent", "lab-a", "--timeout", "3000"], leased);
    const elapsed = Date.now() - t0;
    const actionId = expectTimeoutWithAction(r, true);
    expect(elapsed).toBeLessThan(3000 + 2000); // the caller's deadline plus process start-up
    const status = await ownership(p.serial, lab.env, "lab-a");
    expect(status.locked).toBe(false);
    expect(status.unresolved).toEqual([expect.objectContaining({ actionId, state: "unknown", dispatched: true, ambiguous: true })]);

    // Someone else reboots the phone: a new boot id, but not this action's doing.
    p.device.faults.clear();
    const before = p.device.bootId;
    p.device.reboot(200);
    await waitFor("the phone back with a new boot id", async () => {
      const list = (await farm(["devices"], lab.env)).json["devices"] as (DeviceJson & { properties: { bootId: string } })[];
      const d = list.find((x) => x.serial === p.serial && x.agentName === "lab-a");
      return d?.state === "device" && d.properties.bootId && d.properties.bootId !== before ? true : undefined;
    }, { timeoutMs: 30_000 });
    const rec = await farm(["device", "ownership", "reconcile", "--device", p.serial, "--agent", "lab-a"], lab.env);
    expect(rec.code).toBe(75);
    expect(rec.json["settled"]).toEqual([]);
    expect(rec.json["unresolved"]).toEqual([expect.objectContaining({ actionId, state: "unknown" })]);
  });

  it("a reboot that goes down and comes back is settled with the chain it saw", async () => {
    const p = await phone({ serialno: "GOODREBOOT", rebootDownMs: 300 }, [{ env: lab.env, agents: ["lab-a"] }]);
    const leased = await lease(p.serial, lab.env, "lab-a");
    const before = p.device.bootId;
    const r = await farm(["reboot", "--device", p.serial, "--agent", "lab-a", "--timeout", "30000"], leased);
    expect(r.json).toMatchObject({ ok: true, dispatched: true, ambiguous: false });
    const receipt = await farm(["device", "ownership", "receipt", "--device", p.serial, "--agent", "lab-a", "--action-id", String(r.json["actionId"])], lab.env);
    const action = receipt.json["action"] as { state: string; receiptJson: string };
    expect(action.state).toBe("settled");
    expect(JSON.parse(action.receiptJson)).toMatchObject({ bootIdBefore: before, bootIdAfter: p.device.bootId, acknowledgedAt: expect.any(Number), disconnectedAt: expect.any(Number) });
  });
});

describe("shell mutations run as detached jobs on the phone", () => {
  it("a job outlives its deadline and an agent kill, and reconcile settles it from its completion record", async () => {
    const p = await phone({ serialno: "LONGJOB001" }, [{ env: lab.env, agents: ["lab-a"] }]);
    const leased = await lease(p.serial, lab.env, "lab-a");
    const r = await farm([
      "device",
      "shell",
      "--device",
      p.serial,
      "--agent",
      "lab-a",
      "--timeout",
      "1500",
      "--",
      "until cat /data/local/tmp/longjob.go >/dev/null 2>&1; do sleep 0.1; done; echo finished > /data/local/tmp/longjob.txt; exit 7",
    ], leased);
    const actionId = expectTimeoutWithAction(r, true);
    expect((await ownership(p.serial, lab.env, "lab-a")).locked).toBe(false);
    lab.agent.kill("SIGKILL");
    await lab.agent.exited;
    await lab.restartAgent();
    // Still running: nothing proves it yet, and it stays unknown.
    // The restarted agent answers for the phone once its adb server has it again.
    const early = await waitFor("lab-a to have the phone again", async () => {
      const r = await farm(["device", "ownership", "reconcile", "--device", p.serial, "--agent", "lab-a"], lab.env);
      return r.json["code"] === "DEVICE_OFFLINE" ? undefined : r;
    });
    expect(early.json["unresolved"], early.stdout).toEqual([expect.objectContaining({ actionId })]);
    p.device.state.fs.writeFile("/data/local/tmp/longjob.go", Buffer.from("go\n"), { uid: 0, gids: [0] });
    await waitFor("the job to finish on the phone", async () => (p.device.state.readFile("/data/local/tmp/longjob.txt")?.toString() === "finished\n" ? true : undefined), { timeoutMs: 15_000 });
    const settled = await waitFor("reconcile to settle it", async () => {
      const rec = await farm(["device", "ownership", "reconcile", "--device", p.serial, "--agent", "lab-a"], lab.env);
      return rec.code === 0 ? rec : undefined;
    });
    const row = (settled.json["settled"] as { actionId: string; receiptJson: string }[])[0];
    expect(row?.actionId).toBe(actionId);
    expect(JSON.parse(row?.receiptJson ?? "{}")).toMatchObject({ exitCode: 7, provenBy: expect.stringContaining("/data/local/tmp/farm-jobs/") });
    // Acknowledged: its files leave the phone.
    await waitFor("the job's files removed", async () => {
      const left = p.device.state.fs.readdir("/data/local/tmp/farm-jobs", { uid: 0, gids: [0] }).filter((e) => e.name.includes(actionId));
      return left.length === 0 ? true : undefined;
    });
  });

  it("a setprop whose value was already set is not proven by that value", async () => {
    const p = await phone({ serialno: "SETPROPPRE", props: { "persist.farm.pre": "on" } }, [{ env: lab.env, agents: ["lab-a"] }]);
    const leased = await lease(p.serial, lab.env, "lab-a");
    p.device.faults.set({ hangServices: ["shell,"] });
    const r = await farm(["device", "setprop", "--device", p.serial, "--agent", "lab-a", "--timeout", "2000", "persist.farm.pre", "on"], leased);
    const actionId = expectTimeoutWithAction(r, null);
    p.device.faults.clear();
    const rec = await farm(["device", "ownership", "reconcile", "--device", p.serial, "--agent", "lab-a"], lab.env);
    expect(rec.code).toBe(75);
    expect(rec.json["settled"]).toEqual([]);
    expect(rec.json["unresolved"]).toEqual([expect.objectContaining({ actionId, state: "unknown" })]);
  });
});

describe("outcomes as known", () => {
  it("argument rejections say nothing was dispatched, on the CLI and on the agent", async () => {
    const p = await phone({ serialno: "ARGREJECT1" }, [{ env: lab.env, agents: ["lab-a"] }]);
    const leased = await lease(p.serial, lab.env, "lab-a");
    const badKey = await farm(["device", "setprop", "--device", p.serial, "--agent", "lab-a", "bad key!", "1"], leased);
    expect(badKey.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "key", dispatched: false, ambiguous: false });
    const badTap = await farm(["input", "tap", "x", "10", "--device", p.serial], leased);
    expect(badTap.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", dispatched: false, ambiguous: false });
    const badKeyEvent = await farm(["input", "key", "NOT A KEY", "--device", p.serial, "--agent", "lab-a"], leased);
    expect(badKeyEvent.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "key", dispatched: false, ambiguous: false });
  });

  it("a failure to write the activity log does not change an action's outcome", async () => {
    const p = await phone({ serialno: "ACTIVITY01" }, [{ env: lab.env, agents: ["lab-a"] }]);
    const leased = await lease(p.serial, lab.env, "lab-a");
    // A real write failure in the coordinator's database, for this table only.
    const db = new Database(join(lab.dir.path, "coordinator", "coordinator.db"));
    db.pragma("busy_timeout = 5000");
    db.exec("CREATE TRIGGER activity_fails BEFORE INSERT ON activity BEGIN SELECT RAISE(ABORT, 'test: activity log unwritable'); END");
    try {
      const r = await farm(["device", "setprop", "--device", p.serial, "--agent", "lab-a", "persist.farm.act", "1"], leased);
      expect(r.json).toMatchObject({ ok: true, dispatched: true, ambiguous: false });
      expect(p.device.getProp("persist.farm.act")).toBe("1");
    } finally {
      db.exec("DROP TRIGGER activity_fails");
      db.close();
    }
  });
});
