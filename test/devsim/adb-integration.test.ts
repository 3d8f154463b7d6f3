import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, adbDisconnect, runAdb, startAdbServer, startDevsim, waitForDeviceState, type AdbServer, type Devsim } from "./index.js";

// Proves the simulator against the real adb 29 server and adbkit 3.3.9.

// adbkit is CommonJS. A default import differs between plain Node (module.exports)
// and vitest's interop (module.exports.default); require() is the same in both.
const { Adb } = createRequire(import.meta.url)("@devicefarmer/adbkit") as typeof import("@devicefarmer/adbkit");

let server: AdbServer;
let sim: Devsim;

beforeAll(async () => {
  server = await startAdbServer();
  sim = await startDevsim({ devices: 2, adbPort: server.port });
}, 20_000);

afterAll(async () => {
  await sim?.stop();
  await server?.stop();
  if (server) {
    // stop() must leave no adb server behind.
    expect(() => process.kill(server.pid, 0)).toThrow(/ESRCH/);
  }
});

const serialOf = (index: number) => sim.devices[index]!.serial;

describe("simulated devices through the real adb CLI", () => {
  it("lists both devices as `device` with their models", async () => {
    const { stdout } = await runAdb(server.port, ["devices", "-l"]);
    for (const { serial, device } of sim.devices) {
      const line = stdout.split("\n").find((l) => l.startsWith(`${serial} `));
      expect(line, stdout).toMatch(/\sdevice\s/);
      expect(line).toContain(`model:${device.model.replace(/[^A-Za-z0-9_]/g, "_")}`);
    }
    expect(sim.devices[0]!.device.model).not.toBe(sim.devices[1]!.device.model);
  });

  it("adb shell getprop reads each device’s own properties", async () => {
    for (const { serial, device } of sim.devices) {
      const model = await runAdb(server.port, ["-s", serial, "shell", "getprop", "ro.product.model"]);
      expect(model).toEqual({ code: 0, stdout: `${device.model}\n`, stderr: "" });
      const serialno = await runAdb(server.port, ["-s", serial, "shell", "getprop ro.serialno"]);
      expect(serialno.stdout).toBe(`${device.serialno}\n`);
    }
  });

  it("exit codes and stderr come through shell v2", async () => {
    const serial = serialOf(0);
    expect(await runAdb(server.port, ["-s", serial, "shell", "false"])).toMatchObject({ code: 1, stdout: "" });
    expect(await runAdb(server.port, ["-s", serial, "shell", "exit 42"])).toMatchObject({ code: 42 });
    expect(await runAdb(server.port, ["-s", serial, "shell", "nosuchcmd"])).toEqual({
      code: 127,
      stdout: "",
      stderr: "/system/bin/sh: nosuchcmd: not found\n",
    });
    expect(await runAdb(server.port, ["-s", serial, "shell", "echo a && echo b"])).toEqual({ code: 0, stdout: "a\nb\n", stderr: "" });
  });

  it("stdin reaches the command (close-stdin ends it)", async () => {
    const result = await runAdb(server.port, ["-s", serialOf(1), "shell", "cat"], { input: "line one\nline two\n" });
    expect(result).toEqual({ code: 0, stdout: "line one\nline two\n", stderr: "" });
  });

  it("adb shell without a command runs the script piped to stdin", async () => {
    const { serial, device } = sim.devices[0]!;
    const result = await runAdb(server.port, ["-s", serial, "shell"], { input: "getprop ro.serialno\nfalse; echo $?\nexit 3\necho unreachable\n" });
    expect(result).toEqual({ code: 3, stdout: `${device.serialno}\n1\n`, stderr: "" });
  });

  it("v1 shell (adb shell -x) streams raw output without an exit code", async () => {
    const result = await runAdb(server.port, ["-s", serialOf(0), "shell", "-x", "echo out; nosuchcmd"]);
    expect(result.stdout).toBe("out\n/system/bin/sh: nosuchcmd: not found\n");
    expect(result.code).toBe(0);
  });

  it("large output is chunked within maxdata and arrives intact", async () => {
    const { serial, device } = sim.devices[1]!;
    const big = "x".repeat(3 * 1024 * 1024);
    device.setProp("debug.devsim.big", big);
    const result = await runAdb(server.port, ["-s", serial, "shell", "getprop debug.devsim.big"]);
    expect(result.code).toBe(0);
    expect(result.stdout.length).toBe(big.length + 1);
    expect(result.stdout === `${big}\n`).toBe(true);
  });

  it("unsupported services are refused", async () => {
    // `adb reverse` asks the device for `reverse:list-forward`, which devsim does not offer.
    const result = await runAdb(server.port, ["-s", serialOf(0), "reverse", "--list"]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("closed");
  });
});

describe("simulated devices through adbkit", () => {
  it("listDevices, getProperties and shell", async () => {
    const client = Adb.createClient({ port: server.port });
    const listed = await client.listDevices();
    expect(listed.map((d: { id: string; type: string }) => [d.id, d.type]).sort()).toEqual(sim.devices.map((d) => [d.serial, "device"]).sort());

    for (const { serial, device } of sim.devices) {
      const deviceClient = client.getDevice(serial);
      const props = await deviceClient.getProperties();
      expect(props["ro.product.model"]).toBe(device.model);
      expect(props["ro.serialno"]).toBe(device.serialno);
      expect(props["sys.boot_completed"]).toBe("1");
      expect(Object.keys(props).length).toBe(Object.keys(device.props).length);

      const bootId = await Adb.util.readAll(await deviceClient.shell("cat /proc/sys/kernel/random/boot_id"));
      expect(bootId.toString()).toBe(`${device.bootId}\n`);
    }
    expect(sim.devices[0]!.device.bootId).not.toBe(sim.devices[1]!.device.bootId);
  });

  it("waitBootComplete resolves (shell while-loop, closed by the client)", async () => {
    const client = Adb.createClient({ port: server.port });
    await expect(client.getDevice(serialOf(0)).waitBootComplete()).resolves.toBe(true);
  });

  it("refused services surface as adbkit failures", async () => {
    const client = Adb.createClient({ port: server.port });
    await expect(client.getDevice(serialOf(0)).openLocal("localabstract:nothing")).rejects.toThrow(/closed/);
  });
});

describe("lifecycle", () => {
  it("a closed device goes offline, a disconnected one disappears", async () => {
    const extra = await startDevsim({ devices: 1, adbPort: server.port });
    const { serial, port, device } = extra.devices[0]!;
    try {
      await device.close();
      // adb notices at once and keeps retrying the address in the background.
      const state = await waitForDeviceState(server.port, serial, (s) => s !== "device", { timeoutMs: 5_000 });
      expect([undefined, "offline"]).toContain(state);
      const shell = await runAdb(server.port, ["-s", serial, "shell", "true"]);
      expect(shell.code).not.toBe(0);

      // It comes back when the device listens again on the same port (adb's reconnect).
      await device.listen("127.0.0.1", port);
      await adbConnect(server.port, "127.0.0.1", port);
      expect((await runAdb(server.port, ["-s", serial, "shell", "getprop ro.serialno"])).stdout).toBe(`${device.serialno}\n`);

      await adbDisconnect(server.port, "127.0.0.1", port);
      const { stdout } = await runAdb(server.port, ["devices"]);
      expect(stdout).not.toContain(serial);
    } finally {
      await extra.stop();
    }
  }, 15_000);

  it("the private server runs on its own port with its own HOME", () => {
    expect(server.port).not.toBe(5037);
    expect(server.env["ANDROID_ADB_SERVER_PORT"]).toBe(String(server.port));
    expect(existsSync(`/proc/${server.pid}`)).toBe(true);
  });
});
