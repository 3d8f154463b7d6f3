/**
 * Remote adb limits and aliases: `farm coordinator` (one tunnel per user, two
 * streams per tunnel) and `farm agent` as separate processes, one phone
 * reached through two serials (aliases), a second phone, real adb clients.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbBinary, adbConnect, runAdb, SimDevice, startAdbServer, type AdbServer } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

let lab: SplitFarm;
let user: AdbServer;
const phones: SimDevice[] = [];
const children: ChildProcess[] = [];

async function addPhone(serialno: string, bootId?: string): Promise<{ phone: SimDevice; serial: string }> {
  const phone = new SimDevice({ serialno, ...(bootId ? { bootId } : {}) });
  phones.push(phone);
  const serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
  await waitFor(`${serial} online`, async () => (await stateInFarm(serial)) === "device" || undefined);
  return { phone, serial };
}

async function deviceIn(serial: string): Promise<{ state: string; physicalId: string } | undefined> {
  const list = ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string; properties: { physicalId: string } }[];
  const d = list.find((x) => x.serial === serial);
  return d && d.properties.physicalId ? { state: d.state, physicalId: d.properties.physicalId } : undefined;
}

async function stateInFarm(serial: string): Promise<string | undefined> {
  return (await deviceIn(serial))?.state;
}

async function stateOf(local: string): Promise<string> {
  const r = await runAdb(user.port, ["-s", local, "get-state"]);
  return r.code === 0 ? r.stdout.trim() : "gone";
}

async function connect(serial: string): Promise<{ env: NodeJS.ProcessEnv; local: string; token: string }> {
  const r = await farm(["lease", "acquire", "--device", serial], lab.env);
  expect(r.code, r.stdout + r.stderr).toBe(0);
  const token = (r.json["lease"] as { token: string }).token;
  const env = { ...lab.env, FARM_LEASE: token, ANDROID_ADB_SERVER_PORT: String(user.port) };
  const connected = await farm(["adb", "connect", "--device", serial], env);
  expect(connected.json, connected.stderr).toMatchObject({ ok: true });
  const local = String(connected.json["serial"]);
  await waitFor("the tunnel in the user's adb", async () => ((await stateOf(local)) === "device" ? true : undefined));
  return { env, local, token };
}

/** An adb shell that stays open (its stream too) until killed. */
function holdStream(local: string): ChildProcess {
  const p = spawn(adbBinary(), ["-P", String(user.port), "-s", local, "shell", "sleep", "60"], { stdio: "ignore" });
  children.push(p);
  return p;
}

beforeAll(async () => {
  lab = await startSplitFarm("adb-tunnel-limits", { coordinatorArgs: ["--adb-tunnels-per-user", "1", "--adb-streams-per-tunnel", "2"] });
  user = await startAdbServer();
}, 120_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  await farm(["adb", "disconnect", "--all"], { ...lab?.env, ANDROID_ADB_SERVER_PORT: String(user?.port) }).catch(() => undefined);
  await user?.stop();
  for (const p of phones) await p.close();
  await lab?.stop();
});

describe("remote adb limits and aliases", () => {
  it("refuses a second tunnel over the per-user limit, and a third stream over the per-tunnel one until one ends", async () => {
    const first = await addPhone("RLIMIT01");
    const second = await addPhone("RLIMIT02");
    const a = await connect(first.serial);
    const r = await farm(["lease", "acquire", "--device", second.serial], lab.env);
    const token = (r.json["lease"] as { token: string }).token;
    const over = await farm(["adb", "connect", "--device", second.serial], { ...lab.env, FARM_LEASE: token, ANDROID_ADB_SERVER_PORT: String(user.port) });
    expect(over.json).toMatchObject({ ok: false, code: "TUNNEL_LIMIT" });

    const held = [holdStream(a.local), holdStream(a.local)];
    await waitFor("two streams open in the tunnel", async () => {
      const list = ((await farm(["adb", "list"], a.env)).json["tunnels"] ?? []) as { openStreams: number }[];
      return list[0]?.openStreams === 2 || undefined;
    });
    const third = await runAdb(user.port, ["-s", a.local, "shell", "echo", "third"]);
    expect(third.code).not.toBe(0);
    expect(third.stdout).not.toContain("third");
    for (const p of held) p.kill("SIGKILL");
    await waitFor("a stream free again", async () => ((await runAdb(user.port, ["-s", a.local, "shell", "echo", "again"])).stdout.trim() === "again" ? true : undefined));

    expect((await farm(["adb", "disconnect", "--all"], a.env)).json).toMatchObject({ ok: true });
    await farm(["lease", "release"], a.env);
    await farm(["lease", "release"], { ...lab.env, FARM_LEASE: token });
  });

  it("never reaches the phone through another alias once the tunnel's serial is gone", async () => {
    const bootId = "33333333-4444-4555-8666-777777777777";
    const viaA = await addPhone("RALIAS01", bootId);
    const viaB = await addPhone("RALIAS01", bootId);
    // One phone, two serials.
    expect((await deviceIn(viaA.serial))?.physicalId).toBe((await deviceIn(viaB.serial))?.physicalId);
    const t = await connect(viaA.serial);
    expect((await runAdb(user.port, ["-s", t.local, "shell", "echo", "via-a"])).stdout.trim()).toBe("via-a");

    await viaA.phone.close();
    await waitFor("the tunnel's serial offline", async () => ((await stateInFarm(viaA.serial)) === "offline" ? true : undefined));
    // The same phone is still there as viaB: a stream must fail, not go through it.
    const write = await runAdb(user.port, ["-s", t.local, "shell", "echo tunnel > /sdcard/via-tunnel.txt"]);
    expect(write.code).not.toBe(0);
    const onB = await runAdb(lab.adb.port, ["-s", viaB.serial, "shell", "ls /sdcard/via-tunnel.txt"]);
    expect(onB.stdout + onB.stderr).toMatch(/No such file/);

    await farm(["adb", "disconnect", "--all"], t.env);
    await farm(["lease", "release"], t.env);
  });
});
