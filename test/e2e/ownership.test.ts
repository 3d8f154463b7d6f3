/**
 * Physical identity and device ownership with real processes: the real adb
 * server, simulated phones (one holds a job unrun, as a frozen phone would),
 * `farm standalone`, and the CLI.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, adbDisconnect, SimDevice, startAdbServer, type AdbServer } from "../devsim/index.js";
import { farm, farmProcess, startFarm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

interface DeviceJson {
  serial: string;
  state: string;
  properties: { physicalId: string; identityStatus: string; bootId: string; serialno: string };
}

let dir: TempDir;
let adb: AdbServer;
let standalone: FarmProcess;
let env: NodeJS.ProcessEnv;
let standaloneArgs: string[];
const sims: SimDevice[] = [];
/** The phone of the crash test, which the next test reuses. */
let crashSerial: string | undefined;

const leases = new Map<string, NodeJS.ProcessEnv>();

/** The env of a caller holding a lease on this serial's phone (acquired once). */
async function leaseEnv(serial: string): Promise<NodeJS.ProcessEnv> {
  const known = leases.get(serial);
  if (known) return known;
  const r = await farm(["lease", "acquire", "--device", serial, "--ttl", "10m", "--wait", "30s"], env);
  if (r.code !== 0) throw new Error(`lease acquire failed: ${r.stdout}${r.stderr}`);
  const withLease = { ...env, FARM_LEASE: String((r.json["lease"] as { token: string }).token) };
  leases.set(serial, withLease);
  return withLease;
}

async function devices(): Promise<DeviceJson[]> {
  const r = await farm(["devices"], env);
  if (r.code !== 0) throw new Error(r.stdout + r.stderr);
  return r.json["devices"] as DeviceJson[];
}

function device(serial: string): Promise<DeviceJson> {
  return waitFor(`${serial} with its identity`, async () => (await devices()).find((d) => d.serial === serial && d.state === "device" && d.properties.physicalId !== ""));
}

async function sim(opts: ConstructorParameters<typeof SimDevice>[0]): Promise<{ device: SimDevice; serial: string }> {
  const d = new SimDevice(opts);
  sims.push(d);
  const port = await d.listen();
  return { device: d, serial: await adbConnect(adb.port, "127.0.0.1", port) };
}

beforeAll(async () => {
  dir = await makeTempDir("ownership");
  adb = await startAdbServer();
  env = { FARM_HOME: join(dir.path, "home"), FARM_CONFIG: join(dir.path, "none.json"), FARM_COORDINATOR: "", FARM_TOKEN: "" };
  standaloneArgs = ["standalone", "--listen", "127.0.0.1:0", "--adb-port", String(adb.port), "--lock-dir", join(dir.path, "locks"), "--no-adb-start", "--heartbeat-interval", "500"];
  standalone = await startFarm(standaloneArgs, env);
});

afterAll(async () => {
  await standalone?.stop();
  for (const d of sims) await d.close();
  await adb?.stop();
  await dir?.remove();
});

describe("physical identity", () => {
  it("maps one phone on two serials to one physical id, and shows the aliases", async () => {
    const bootId = "11111111-2222-4333-8444-555555555555";
    const props = { "ro.product.model": "Alias Phone" };
    const a = await sim({ serialno: "ALIAS0001", bootId, props });
    const b = await sim({ serialno: "ALIAS0001", bootId, props });
    const [da, db] = [await device(a.serial), await device(b.serial)];
    expect(da.properties.physicalId).toBe(db.properties.physicalId);
    expect(da.properties.identityStatus).toBe("ok");
    const status = await farm(["device", "ownership", "status", "--device", a.serial], env);
    expect(status.json["ownership"]).toMatchObject({ physicalId: da.properties.physicalId, aliases: [a.serial, b.serial].sort(), locked: false });
  });

  it("detects two phones that share an identity, refuses to change them, and lets an admin pin them apart", async () => {
    const props = { "ro.product.model": "Zero Phone" };
    const a = await sim({ serialno: "0000000000", props });
    const b = await sim({ serialno: "0000000000", props });
    const both = await waitFor("both flagged duplicate", async () => {
      const list = (await devices()).filter((d) => d.serial === a.serial || d.serial === b.serial);
      return list.length === 2 && list.every((d) => d.properties.identityStatus === "duplicate") ? list : undefined;
    });
    expect(both[0]?.properties.physicalId).toBe(both[1]?.properties.physicalId);
    const refused = await farm(["device", "setprop", "--device", a.serial, "persist.farm.t", "1"], env);
    expect(refused.json).toMatchObject({ ok: false, code: "DUPLICATE_IDENTITY", dispatched: false, ambiguous: false });
    expect(a.device.getProp("persist.farm.t")).toBeUndefined();

    const pinned = await farm(["device", "pin", "--device", a.serial, "--label", "left-bench"], env);
    expect(pinned.code).toBe(0);
    const after = await waitFor("distinct identities after the pin", async () => {
      const list = (await devices()).filter((d) => d.serial === a.serial || d.serial === b.serial);
      return list.length === 2 && list.every((d) => d.properties.identityStatus === "ok") ? list : undefined;
    });
    expect(after[0]?.properties.physicalId).not.toBe(after[1]?.properties.physicalId);
    const ok = await farm(["device", "setprop", "--device", a.serial, "persist.farm.t", "1"], await leaseEnv(a.serial));
    expect(ok.json).toMatchObject({ ok: true, dispatched: true, ambiguous: false });
    expect(a.device.getProp("persist.farm.t")).toBe("1");
  });

  it("records a reboot when a phone comes back with a new boot id", async () => {
    const first = await sim({ serialno: "REBOOT0001" });
    const before = await device(first.serial);
    const port = first.device.port as number;
    await first.device.close();
    await adbDisconnect(adb.port, "127.0.0.1", port);
    const again = new SimDevice({ serialno: "REBOOT0001" });
    sims.push(again);
    await again.listen("127.0.0.1", port);
    await adbConnect(adb.port, "127.0.0.1", port);
    const after = await waitFor("the new boot id", async () => {
      const d = (await devices()).find((x) => x.serial === first.serial);
      return d && d.properties.bootId === again.bootId ? d : undefined;
    });
    expect(after.properties.physicalId).toBe(before.properties.physicalId);
    const status = await waitFor("the reboot event", async () => {
      const s = await farm(["device", "ownership", "status", "--device", first.serial], env);
      const history = (s.json["ownership"] as { history: { kind: string; detail: string }[] }).history;
      return history.some((h) => h.kind === "reboot") ? history : undefined;
    });
    expect(status.find((h) => h.kind === "reboot")?.detail).toContain(again.bootId);
  });
});

describe("ownership journal", () => {
  it("journals a completed action with a receipt", async () => {
    const { serial } = await sim({ serialno: "JOURNAL001" });
    await device(serial);
    const r = await farm(["device", "shell", "--device", serial, "--", "echo", "hi"], await leaseEnv(serial));
    expect(r.json).toMatchObject({ ok: true, exitCode: 0, stdout: "hi\n", dispatched: true, ambiguous: false });
    const receipt = await farm(["device", "ownership", "receipt", "--device", serial, "--action-id", String(r.json["actionId"])], env);
    expect(receipt.json["action"]).toMatchObject({ kind: "shell", state: "settled", dispatched: true, settledBy: "completed" });
    const failing = await farm(["device", "shell", "--device", serial, "--", "exit", "3"], await leaseEnv(serial));
    expect(failing.code).toBe(3);
    expect(failing.json).toMatchObject({ exitCode: 3, dispatched: true });
  });

  it("keeps an action whose answer never came unresolved across an agent crash, and settles it only on proof", async () => {
    const phone = await sim({ serialno: "CRASH00001" });
    const serial = (crashSerial = phone.serial);
    await device(serial);

    // The phone takes the job's stream but runs it only when released (as a frozen phone would); the agent journals and sends the action...
    phone.device.faults.set({ holdServicesContaining: ["persist.farm.proof"] });
    const pending = farm(["device", "setprop", "--device", serial, "persist.farm.proof", "yes", "--timeout", "60000"], await leaseEnv(serial));
    await phone.device.faults.held();
    const journaled = await farm(["device", "ownership", "status", "--device", serial], env);
    expect(journaled.json["ownership"]).toMatchObject({ locked: true });
    // ...and dies before the answer. The phone then runs it.
    standalone.kill("SIGKILL");
    await standalone.exited;
    const lost = await pending;
    expect(lost.code).toBe(69);
    expect(lost.json).toMatchObject({ ok: false, code: "COORDINATOR_UNAVAILABLE", dispatched: null, ambiguous: true });
    phone.device.faults.set({ holdServicesContaining: null });
    expect(phone.device.faults.releaseHeld()).toBe(1);

    standalone = await startFarm(standaloneArgs, env);
    await device(serial);
    const status = await farm(["device", "ownership", "status", "--device", serial], env);
    const unresolved = (status.json["ownership"] as { unresolved: { actionId: string; state: string; ambiguous: boolean }[] }).unresolved;
    expect(unresolved).toHaveLength(1);
    expect(unresolved[0]).toMatchObject({ state: "unknown", ambiguous: true });
    const actionId = unresolved[0]?.actionId as string;

    // Mutations are refused; reads work.
    const refused = await farm(["device", "shell", "--device", serial, "--", "echo", "x"], await leaseEnv(serial));
    expect(refused.json).toMatchObject({ ok: false, code: "DEVICE_OWNERSHIP_UNRESOLVED", dispatched: false, ambiguous: false });
    expect((await devices()).find((d) => d.serial === serial)?.state).toBe("device");

    // The job ran on the phone and left its completion record: reconcile proves it from that record.
    let last = "";
    const reconciled = await waitFor("the effect to be provable", async () => {
      const r = await farm(["device", "ownership", "reconcile", "--device", serial], env);
      last = `${r.code} ${r.stdout}`;
      return r.code === 0 ? r : undefined;
    }).catch((err: unknown) => {
      // What reconcile last said, for a failure in CI (seen once, not reproduced).
      throw new Error(`${(err as Error).message}; the last reconcile: ${last}`);
    });
    expect(reconciled.json["settled"]).toEqual([expect.objectContaining({ actionId, state: "settled", settledBy: "reconciled" })]);
    expect(JSON.parse((reconciled.json["settled"] as { receiptJson: string }[])[0]?.receiptJson ?? "{}")).toMatchObject({ exitCode: 0, provenBy: expect.stringContaining("device job record") });
    const ok = await farm(["device", "shell", "--device", serial, "--", "echo", "free"], await leaseEnv(serial));
    expect(ok.json).toMatchObject({ ok: true, stdout: "free\n" });
  });

  it("leaves an action it cannot prove unresolved until an admin abandons it", async () => {
    const serial = crashSerial as string;
    const pending = farm(["device", "shell", "--device", serial, "--", "sleep", "30"], await leaseEnv(serial));
    await waitFor("the action to be journaled", async () => {
      const s = await farm(["device", "ownership", "status", "--device", serial], env);
      return (s.json["ownership"] as { locked: boolean } | undefined)?.locked ? true : undefined;
    });
    standalone.kill("SIGKILL");
    await standalone.exited;
    expect((await pending).json).toMatchObject({ ok: false, ambiguous: true, dispatched: null });
    standalone = await startFarm(standaloneArgs, env);
    await device(serial);
    const r = await farm(["device", "ownership", "reconcile", "--device", serial], env);
    expect(r.code).toBe(75);
    expect(r.json["settled"]).toEqual([]);
    const unresolved = r.json["unresolved"] as { actionId: string }[];
    expect(unresolved).toHaveLength(1);
    const actionId = unresolved[0]?.actionId as string;

    const noReason = await farm(["device", "ownership", "abandon", "--device", serial, "--action-id", actionId], env);
    expect(noReason.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "reason" });
    const abandoned = await farm(["device", "ownership", "abandon", "--device", serial, "--action-id", actionId, "--reason", "sleep has no effect"], env);
    expect(abandoned.json["action"]).toMatchObject({ state: "abandoned", abandonReason: "sleep has no effect" });
    expect((abandoned.json["action"] as { settledBy: string }).settledBy).toBe("");
    const ok = await farm(["device", "shell", "--device", serial, "--", "echo", "again"], await leaseEnv(serial));
    expect(ok.json).toMatchObject({ ok: true, stdout: "again\n" });
  });

  it("makes two agents on one host take turns on a phone they both see", async () => {
    // A second agent with its own data dir, the same adb server and the same lock dir.
    const url = String(standalone.ready["url"]);
    const admin = { ...env, FARM_COORDINATOR: url };
    const token = await farm(["token", "create", "--kind", "agent", "--name", "second-agent"], admin);
    const tokenFile = join(dir.path, "second.token");
    await import("node:fs/promises").then((fs) => fs.writeFile(tokenFile, String(token.json["token"]), { mode: 0o600 }));
    const second = await startFarm([
      "agent",
      "--coordinator",
      url,
      "--data-dir",
      join(dir.path, "second-agent"),
      "--token-file",
      tokenFile,
      "--name",
      "second",
      "--adb-port",
      String(adb.port),
      "--lock-dir",
      join(dir.path, "locks"),
      "--no-adb-start",
      "--heartbeat-interval",
      "500",
    ], env);
    try {
      const { serial } = await sim({ serialno: "SHARED0001" });
      await waitFor("the phone on both agents", async () => {
        const list = (await devices()).filter((d) => d.serial === serial && d.properties.physicalId !== "");
        return list.length === 2 ? list : undefined;
      });
      // Whichever agent reported it second is quarantined until an admin accepts the alias.
      for (const agent of [String(standalone.ready["agentId"]), "second"]) {
        expect((await farm(["device", "alias", "accept", "--device", serial, "--agent", agent], env)).json["device"]).toMatchObject({ state: "device" });
      }
      // Without naming the agent, the serial is ambiguous and nothing is sent.
      const ambiguous = await farm(["device", "shell", "--device", serial, "--", "echo", "x"], env);
      expect(ambiguous.json).toMatchObject({ ok: false, code: "DEVICE_AMBIGUOUS", field: "agent", dispatched: false });

      const standaloneAgent = String(standalone.ready["agentId"]);
      const long = farm(["device", "shell", "--device", serial, "--agent", standaloneAgent, "--", "sleep", "10"], await leaseEnv(serial));
      await waitFor("the first agent to hold the phone", async () => {
        const s = await farm(["device", "ownership", "status", "--device", serial, "--agent", "second"], env);
        return (s.json["ownership"] as { locked: boolean } | undefined)?.locked ? true : undefined;
      });
      const busy = await farm(["device", "shell", "--device", serial, "--agent", "second", "--timeout", "5000", "--", "echo", "x"], await leaseEnv(serial));
      expect(busy.json).toMatchObject({ ok: false, code: "DEVICE_BUSY", dispatched: false, ambiguous: false });
      expect((await long).json).toMatchObject({ ok: true, exitCode: 0 });
      const after = await farm(["device", "shell", "--device", serial, "--agent", "second", "--", "echo", "mine"], await leaseEnv(serial));
      expect(after.json).toMatchObject({ ok: true, stdout: "mine\n" });
    } finally {
      await second.stop();
    }
  });

  it("refuses a second agent on the same data dir, naming the owner", async () => {
    const second = await farmProcess(["standalone", "--listen", "127.0.0.1:0", "--adb-port", String(adb.port), "--no-adb-start"], env);
    expect(second.code).toBe(75);
    expect(second.json).toMatchObject({ ok: false, code: "AGENT_DATA_DIR_LOCKED" });
    expect(String(second.json["message"])).toContain(`pid ${standalone.pid}`);
  });
});
