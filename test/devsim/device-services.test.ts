import { request } from "node:http";
import { createRequire } from "node:module";
import { createServer, type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SimDevice, adbDisconnect, runAdb, startAdbServer, startDevsim, waitForDeviceState, type AdbServer, type Devsim } from "./index.js";

// localabstract/tcp sockets and the app SDK, reboot/root/unroot, AUTH and logcat, through the real adb server and adbkit.

const { Adb } = createRequire(import.meta.url)("@devicefarmer/adbkit") as typeof import("@devicefarmer/adbkit");

let server: AdbServer;
let sim: Devsim;

beforeAll(async () => {
  server = await startAdbServer();
  sim = await startDevsim({ devices: [{ rebootDownMs: 300 }, { rebootDownMs: 300, props: { "ro.debuggable": "1", "ro.build.type": "userdebug" } }], adbPort: server.port });
}, 20_000);

afterAll(async () => {
  await sim?.stop();
  await server?.stop();
});

const adb = (index: number, ...args: string[]) => runAdb(server.port, ["-s", sim.devices[index]!.serial, ...args]);

function httpGet(port: number, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, agent: false, headers }, (res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => (body += chunk.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("device sockets and the app SDK", () => {
  it("publishes its endpoint descriptor; adb forward tcp:0 localabstract:… reaches the SDK, which checks its identity", async () => {
    await adb(0, "shell", "am start -n com.example.farmdemo/.MainActivity");
    const read = async () =>
      JSON.parse((await adb(0, "shell", "run-as com.example.farmdemo cat files/farm_sdk_endpoint.json")).stdout) as { ok: boolean; runtimeEpoch: string; socketName: string; packageName: string; transport: string; schema: string };
    let d = await read();
    for (let i = 0; i < 50 && !d.ok; i++) d = await read();
    expect(d).toMatchObject({ schema: "farm.android-sdk-endpoint.v1", ok: true, packageName: "com.example.farmdemo", transport: "localabstract", socketName: `farm-sdk-${d.runtimeEpoch}`, error: null });
    expect(sim.devices[0]!.device.state.sdkRuntimeEpoch("com.example.farmdemo")).toBe(d.runtimeEpoch);
    expect((await adb(0, "shell", "cat /proc/net/unix")).stdout).toMatch(new RegExp(`^0000000000000000: 00000002 00000000 00010000 0001 01 +\\d+ @${d.socketName}$`, "m"));
    // Only the app (run-as) reads its private files.
    expect((await adb(0, "shell", "cat /data/data/com.example.farmdemo/files/farm_sdk_endpoint.json")).code).not.toBe(0);

    const forward = await adb(0, "forward", "tcp:0", `localabstract:${d.socketName}`);
    expect(forward.code).toBe(0);
    const port = Number(forward.stdout.trim());
    const identity = { "x-farm-sdk-package": "com.example.farmdemo", "x-farm-sdk-epoch": d.runtimeEpoch };
    const info = await httpGet(port, "/v1/info", identity);
    expect(info.status).toBe(200);
    expect(JSON.parse(info.body)).toMatchObject({ package: "com.example.farmdemo", versionName: "1.4.2", sdk: "farm-sdk/1", runtimeBinding: { packageName: "com.example.farmdemo", runtimeEpoch: d.runtimeEpoch } });
    expect((await httpGet(port, "/v1/info")).status).toBe(400);
    expect((await httpGet(port, "/v1/info", { ...identity, "x-farm-sdk-epoch": "stale" })).status).toBe(409);
    const tree = JSON.parse((await httpGet(port, "/v1/tree", identity)).body) as { root: { children: unknown[] } };
    expect(JSON.stringify(tree)).toContain("\"resourceId\":\"com.example.farmdemo:id/remember\"");

    // The app stops: its socket is gone, the forward's connections are refused; the descriptor stays, stale.
    await adb(0, "shell", "am force-stop com.example.farmdemo");
    await expect(httpGet(port, "/v1/info", identity)).rejects.toThrow(/socket hang up|ECONNRESET/);
    expect((await read()).runtimeEpoch).toBe(d.runtimeEpoch);
    // A new start is a new runtime on a new socket.
    await adb(0, "shell", "am start -n com.example.farmdemo/.MainActivity");
    let next = await read();
    for (let i = 0; i < 50 && (!next.ok || next.runtimeEpoch === d.runtimeEpoch); i++) next = await read();
    expect(next.runtimeEpoch).not.toBe(d.runtimeEpoch);
    await adb(0, "shell", "am force-stop com.example.farmdemo");
    await adb(0, "forward", "--remove", `tcp:${port}`);
  });

  it("adbkit openLocal/openTcp pipe bytes; unknown sockets are refused", async () => {
    const echo = createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    const device = sim.devices[0]!.device;
    device.state.sockets.registerPort("tcp:8080", (echo.address() as AddressInfo).port);
    try {
      const client = Adb.createClient({ port: server.port }).getDevice(sim.devices[0]!.serial);
      const conn = await client.openTcp(8080);
      const reply = new Promise<string>((resolve) => conn.once("data", (chunk: Buffer) => resolve(chunk.toString())));
      conn.write("ping");
      expect(await reply).toBe("ping");
      conn.end();
      await expect(client.openTcp(8081)).rejects.toThrow(/closed/);
      await expect(client.openLocal("localabstract:nothing")).rejects.toThrow(/closed/);
    } finally {
      device.state.sockets.unregister("tcp:8080");
      echo.close();
    }
  });
});

describe("reboot, root and unroot", () => {
  it("adb reboot: the device drops and returns with a new boot id", async () => {
    const { serial, device } = sim.devices[0]!;
    const before = device.bootId;
    const gone = waitForDeviceState(server.port, serial, (state) => state !== "device");
    await adb(0, "reboot");
    await gone;
    await waitForDeviceState(server.port, serial, "device");
    expect(device.bootId).not.toBe(before);
    expect((await adb(0, "shell", "cat /proc/sys/kernel/random/boot_id")).stdout).toBe(`${device.bootId}\n`);
  });

  it("adbkit reboot() resolves when the stream closes", async () => {
    const { serial } = sim.devices[0]!;
    const client = Adb.createClient({ port: server.port }).getDevice(serial);
    const gone = waitForDeviceState(server.port, serial, (state) => state !== "device");
    await expect(client.reboot()).resolves.toBe(true);
    await gone;
    await waitForDeviceState(server.port, serial, "device");
  });

  it("root on a production build is refused with adbd’s words", async () => {
    expect((await adb(0, "root")).stdout).toBe("adbd cannot run as root in production builds\n");
    const unroot = await adb(0, "unroot");
    expect(unroot.stdout + unroot.stderr).toBe("adbd not running as root\n");
  });

  it("root/unroot on a userdebug build restart adbd", async () => {
    const root = await adb(1, "root");
    expect(root.stdout).toBe("restarting adbd as root\n");
    await waitForDeviceState(server.port, sim.devices[1]!.serial, "device");
    expect((await adb(1, "shell", "id -u; whoami")).stdout).toMatch(/root\n$/);
    expect((await adb(1, "root")).stdout).toBe("adbd is already running as root\n");
    expect((await adb(1, "unroot")).stdout).toBe("restarting adbd as non root\n");
    await waitForDeviceState(server.port, sim.devices[1]!.serial, "device");
    expect((await adb(1, "shell", "whoami")).stdout).toBe("shell\n");
  });
});

describe("AUTH", () => {
  it("a device demanding AUTH shows unauthorized until the key is accepted", async () => {
    const device = new SimDevice({ auth: "deny" });
    const port = await device.listen();
    const serial = `127.0.0.1:${port}`;
    try {
      const connect = await runAdb(server.port, ["connect", serial]);
      expect(`${connect.stdout}${connect.stderr}`).toMatch(/failed to authenticate|connected to/);
      await waitForDeviceState(server.port, serial, "unauthorized");
      device.authorize();
      await waitForDeviceState(server.port, serial, "device");
      expect((await runAdb(server.port, ["-s", serial, "shell", "echo ok"])).stdout).toBe("ok\n");
    } finally {
      await adbDisconnect(server.port, "127.0.0.1", port).catch(() => undefined);
      await device.dispose();
    }
  });

  it("'accept' mode lets the host in once it sends its public key", async () => {
    const device = new SimDevice({ auth: "accept" });
    const port = await device.listen();
    try {
      // adb connect reports "failed to authenticate" at the first AUTH, then the key is accepted.
      await runAdb(server.port, ["connect", `127.0.0.1:${port}`]);
      await waitForDeviceState(server.port, `127.0.0.1:${port}`, "device");
    } finally {
      await adbDisconnect(server.port, "127.0.0.1", port).catch(() => undefined);
      await device.dispose();
    }
  });
});

describe("logcat", () => {
  it("adb logcat -d prints threadtime text", async () => {
    await adb(0, "shell", "am start -n com.example.farmdemo/.MainActivity");
    const { stdout, code } = await adb(0, "logcat", "-d");
    expect(code).toBe(0);
    expect(stdout).toMatch(/^\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} +\d+ +\d+ I ActivityManager: Start proc \d+:com.example.farmdemo\//m);
  });

  it("adbkit openLogcat() parses the binary -B stream live", async () => {
    const client = Adb.createClient({ port: server.port }).getDevice(sim.devices[0]!.serial);
    await adb(0, "shell", "am force-stop com.example.farmdemo");
    const reader = await client.openLogcat({ clear: true });
    try {
      const seen = new Promise<{ tag: string; message: string; priority: number }>((resolve) =>
        reader.on("entry", (entry: { tag: string; message: string; priority: number }) => {
          if (entry.message.includes("com.example.farmdemo")) resolve(entry);
        })
      );
      await adb(0, "shell", "am start -n com.example.farmdemo/.MainActivity");
      expect(await seen).toMatchObject({ tag: "ActivityManager", priority: 4 });
    } finally {
      reader.end();
    }
  });
});
