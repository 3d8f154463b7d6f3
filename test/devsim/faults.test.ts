import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { clearFaults, controlRequest, runAction, setFaults } from "./control/control-client.js";
import { parseScenario } from "./control/scenario.js";
import { parseAssignment, runControlCommand } from "./control-cli.js";
import { adbConnect, runAdb, startAdbServer, startDevsim, waitForDeviceState, type AdbServer, type Devsim } from "./index.js";

// Each fault, switched at run time through the API or the control server, as the real adb server and adbkit report it.

const require = createRequire(import.meta.url);
const { Adb } = require("@devicefarmer/adbkit") as typeof import("@devicefarmer/adbkit");
const sharp = require("sharp") as typeof import("sharp");

let server: AdbServer;
let sim: Devsim;
let dir: string;

beforeAll(async () => {
  server = await startAdbServer();
  sim = await startDevsim({ devices: [{ rebootDownMs: 300 }, {}], adbPort: server.port, control: true });
  dir = await mkdtemp(join(tmpdir(), "devsim-faults-"));
}, 20_000);

afterAll(async () => {
  if (process.env["DEVSIM_DEBUG"]) process.stderr.write(server.log().split("\n").filter((l) => /offline|kick|terminated|connect|transport/.test(l)).slice(-40).join("\n"));
  await sim?.stop();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const entry = (index: number) => sim.devices[index]!;
const url = () => sim.controlUrl!;
const adb = (index: number, args: string[], timeoutMs?: number) => runAdb(server.port, ["-s", entry(index).serial, ...args], timeoutMs ? { timeoutMs } : {});

beforeEach(async () => {
  for (const { device } of sim.devices) device.faults.clear();
  // A previous test may have left device 0 away; bring it back.
  const { device, port } = entry(0);
  if (device.port === undefined) {
    await device.restore();
    await adbConnect(server.port, "127.0.0.1", port);
  }
});

function execOut(index: number, command: string[]): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    execFile("adb", ["-P", String(server.port), "-s", entry(index).serial, "exec-out", ...command], { encoding: "buffer", maxBuffer: 64 * 1024 * 1024 }, (error, stdout) => (error ? reject(error) : resolve(stdout)))
  );
}

/** Rejects with 'deadline' if the promise does not settle in time (the caller's deadline). */
function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("deadline")), ms)))]).finally(() => clearTimeout(timer));
}

describe("vanish and reboot", () => {
  it("vanish through the control API: adb shows offline; restore brings it back", async () => {
    const { serial, port } = entry(0);
    const gone = waitForDeviceState(server.port, serial, (state) => state !== "device");
    const summary = await runAction(url(), serial, { action: "vanish" });
    expect(summary.ports).toEqual([]);
    expect(await gone).toBe("offline");
    expect((await adb(0, ["shell", "true"])).code).not.toBe(0);
    await runAction(url(), serial, { action: "restore" });
    await adbConnect(server.port, "127.0.0.1", port);
    expect((await adb(0, ["shell", "echo back"])).stdout).toBe("back\n");
  });

  it("vanish after N bytes: adb pull fails, adbkit pull reports a premature end", async () => {
    const { device } = entry(0);
    device.state.fs.writeFile("/data/local/tmp/big.bin", randomBytes(4 * 1024 * 1024), device.state.shellCaller);
    device.faults.set({ vanishAfterBytes: 1024 * 1024 });
    const pull = await adb(0, ["pull", "/data/local/tmp/big.bin", join(dir, "big.bin")]);
    expect(pull.code).not.toBe(0);
    expect(device.port).toBeUndefined();

    await device.restore();
    await adbConnect(server.port, "127.0.0.1", entry(0).port);
    device.faults.set({ vanishAfterBytes: 512 * 1024 });
    const transfer = await Adb.createClient({ port: server.port }).getDevice(entry(0).serial).pull("/data/local/tmp/big.bin");
    await expect(Adb.util.readAll(transfer)).rejects.toThrow(/Premature end of stream/);
  });

  it("reboot action: offline, then back with a new boot id", async () => {
    const { serial, device } = entry(0);
    const before = device.bootId;
    const gone = waitForDeviceState(server.port, serial, (state) => state !== "device");
    await runAction(url(), serial, { action: "reboot", downMs: 300 });
    await gone;
    await waitForDeviceState(server.port, serial, "device");
    const after = (await adb(0, ["shell", "cat /proc/sys/kernel/random/boot_id"])).stdout.trim();
    expect(after).toBe(device.bootId);
    expect(after).not.toBe(before);
  });
});

describe("hang and slow link", () => {
  it("a hung stream blocks adbkit and the adb CLI until the caller’s deadline", async () => {
    await setFaults(url(), entry(1).serial, { hangServices: ["shell:", "shell,"] });
    const device = Adb.createClient({ port: server.port }).getDevice(entry(1).serial);
    await expect(withDeadline(device.shell("echo hi").then((stream: Parameters<typeof Adb.util.readAll>[0]) => Adb.util.readAll(stream)), 500)).rejects.toThrow("deadline");
    await expect(adb(1, ["shell", "echo hi"], 700)).rejects.toThrow(/failed/);
    // Other services still work; clearing the fault restores the shell.
    expect((await device.stat("/sdcard")).isSymbolicLink()).toBe(true);
    await clearFaults(url(), entry(1).serial);
    expect((await adb(1, ["shell", "echo hi"])).stdout).toBe("hi\n");
  });

  it("a held service is not run until the test releases it, then runs as sent", async () => {
    const { device } = entry(1);
    device.faults.set({ holdServicesContaining: ["held-mark"] });
    const held = device.faults.held();
    const shell = adb(1, ["shell", "echo ran > /data/local/tmp/held-mark"]);
    await held;
    // Other services still run while one is held.
    expect((await adb(1, ["shell", "echo free"])).stdout).toBe("free\n");
    expect(device.state.fs.exists("/data/local/tmp/held-mark", device.state.shellCaller)).toBe(false);
    expect(device.faults.releaseHeld()).toBe(1);
    expect((await shell).code).toBe(0);
    expect(device.state.fs.readFile("/data/local/tmp/held-mark", device.state.shellCaller).toString()).toBe("ran\n");
  });

  it("latency and bandwidth slow the link down", async () => {
    const { device } = entry(1);
    device.state.fs.writeFile("/data/local/tmp/one.bin", randomBytes(1024 * 1024), device.state.shellCaller);
    device.faults.set({ bandwidthBytesPerSec: 2 * 1024 * 1024, latencyMs: 100 });
    let started = Date.now();
    expect((await adb(1, ["shell", "echo slow"])).stdout).toBe("slow\n");
    expect(Date.now() - started).toBeGreaterThanOrEqual(200);
    started = Date.now();
    expect((await adb(1, ["pull", "/data/local/tmp/one.bin", join(dir, "one.bin")])).code).toBe(0);
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
  });
});

describe("screen faults", () => {
  it.each(["corrupt", "truncated", "lying-header"] as const)("png=%s: the screenshot fails to decode", async (png) => {
    await setFaults(url(), entry(1).serial, { png });
    const bytes = await execOut(1, ["screencap", "-p"]);
    expect(bytes.subarray(1, 4).toString()).toBe("PNG");
    await expect(sharp(bytes).raw().toBuffer()).rejects.toThrow();
    const { width, height } = entry(1).device.state.display.logicalSize;
    if (png === "lying-header") expect(await sharp(bytes).metadata()).toMatchObject({ width: width * 2, height: height * 2 });
  });

  it("screen off and locked through the control API", async () => {
    const { serial } = entry(1);
    expect((await runAction(url(), serial, { action: "screen-off" })).screen).toMatchObject({ on: false, locked: true });
    expect((await adb(1, ["shell", "dumpsys power | grep mWakefulness="])).stdout).toBe("  mWakefulness=Asleep\n");
    await runAction(url(), serial, { action: "screen-on" });
    expect((await adb(1, ["shell", "dumpsys window | grep isStatusBarKeyguard"])).stdout).toBe("  isStatusBarKeyguard=true\n");
    await runAction(url(), serial, { action: "unlock" });
    expect((await adb(1, ["shell", "dumpsys window | grep isStatusBarKeyguard"])).stdout).toBe("  isStatusBarKeyguard=false\n");
  });
});

describe("control API, CLI and scenarios", () => {
  it("reports devices and rejects bad requests with the offending field", async () => {
    const devices = (await controlRequest(url(), "GET", "/devices")) as Array<{ serials: string[]; serialno: string }>;
    expect(devices.map((d) => d.serials[0])).toEqual(sim.devices.map((d) => d.serial));
    await expect(setFaults(url(), entry(1).serial, { nope: 1 })).rejects.toThrow(/400 unknown fault "nope"/);
    await expect(setFaults(url(), entry(1).serial, { png: "blurry" })).rejects.toThrow(/400 png must be one of/);
    await expect(setFaults(url(), "no-such", { storageFull: true })).rejects.toThrow(/404/);
  });

  it("the fault subcommand switches faults on a running simulator (storage full)", async () => {
    expect(parseAssignment("hangServices=sync:,shell:")).toEqual(["hangServices", ["sync:", "shell:"]]);
    const write = process.stdout.write;
    process.stdout.write = (() => true) as typeof process.stdout.write;
    try {
      await runControlCommand("fault", ["--control", url(), entry(1).serial, "storageFull=true"], {});
    } finally {
      process.stdout.write = write;
    }
    const push = await adb(1, ["shell", "echo x > /data/local/tmp/x"]);
    expect(push.stderr).toBe("/system/bin/sh: can't create /data/local/tmp/x: No space left on device\n");
  });

  it("a scenario schedules faults and actions", async () => {
    const scenario = parseScenario({
      devices: [{ serialno: "SCEN0001", profile: "Pixel 6a", rebootDownMs: 200, faults: { latencyMs: 1 } }],
      schedule: [
        { at: 50, device: 0, faults: { png: "truncated" } },
        { at: 100, device: 0, action: "reboot" },
      ],
    });
    const scenarioSim = await startDevsim({ adbPort: server.port, scenario });
    try {
      const { serial, device } = scenarioSim.devices[0]!;
      expect(device.model).toBe("Pixel 6a");
      const firstBoot = device.bootId;
      await waitForDeviceState(server.port, serial, (state) => state !== "device");
      await waitForDeviceState(server.port, serial, "device");
      expect(device.bootId).not.toBe(firstBoot);
      expect(device.faults.current).toEqual({ latencyMs: 1, png: "truncated" });
    } finally {
      await scenarioSim.stop();
    }
    expect(() => parseScenario({ devices: [{}], schedule: [{ at: 1, device: 3, action: "reboot" }] })).toThrow(/schedule\[0\].device/);
    expect(() => parseScenario({ devices: [{ faults: { bogus: true } }] })).toThrow(/devices\[0\].faults: unknown fault/);
  });
});
