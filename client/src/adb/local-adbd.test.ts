import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Duplex } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probeBanner } from "./adb-banner.js";
import { startLocalAdbd, type LocalAdbd } from "./local-adbd.js";
import { loadDevsim, openThroughAdbServer, type AdbServerHandle, type DevsimApi } from "./testing/devsim-lab.js";

// The endpoint between two real adb 29 servers: a user's (adb connect
// 127.0.0.1:PORT) and a lab's with a devsim phone. Each stream the user's
// server opens goes to the phone through the lab server (host:transport,
// then the service): the adb protocol on both sides, with a plain TCP
// bridge where the coordinator would be.

let ds: DevsimApi;
let lab: AdbServerHandle;
let user: AdbServerHandle;
let sim: Awaited<ReturnType<DevsimApi["startDevsim"]>>;
let endpoint: LocalAdbd;
let labSerial: string;
let dir: string;
const logged: string[] = [];

/** The coordinator's stand-in: one service on the lab phone through the lab adb server. */
const openOnLab = (service: string): Promise<Duplex> => openThroughAdbServer(lab.port, labSerial, service);

const adb = (...args: string[]) => ds.runAdb(user.port, ["-s", endpoint.serial, ...args], { timeoutMs: 60_000 });
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

beforeAll(async () => {
  ds = await loadDevsim();
  [lab, user] = await Promise.all([ds.startAdbServer(), ds.startAdbServer()]);
  sim = await ds.startDevsim({ devices: 1, adbPort: lab.port });
  labSerial = sim.devices[0]!.serial;
  dir = await mkdtemp(join(tmpdir(), "local-adbd-"));
  const openStream = async (service: string) => {
    // The farm refuses some services (host requests, say); here exec: stands for one.
    if (service.startsWith("exec:")) throw new Error("exec: is not allowed on this tunnel");
    return openOnLab(service);
  };
  endpoint = await startLocalAdbd({ openStream, banner: await probeBanner(openOnLab, 10_000), log: (line) => logged.push(line) });
  const connected = await ds.runAdb(user.port, ["connect", endpoint.serial]);
  expect(`${connected.stdout}${connected.stderr}`).toMatch(/^connected to /m);
  await ds.waitForDeviceState(user.port, endpoint.serial, "device");
});

afterAll(async () => {
  await endpoint?.close();
  if (user) await ds.runAdb(user.port, ["disconnect", endpoint.serial]).catch(() => undefined);
  await sim?.stop();
  await Promise.all([user?.stop(), lab?.stop()]);
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("the local adbd endpoint, through real adb servers", () => {
  it("shows the phone with its model, and runs shell commands with v2 exit codes and stderr", async () => {
    const devices = await ds.runAdb(user.port, ["devices", "-l"]);
    const line = devices.stdout.split("\n").find((l) => l.startsWith(`${endpoint.serial} `));
    expect(line).toMatch(/\sdevice\s/);
    expect(line).toContain(`model:${sim.devices[0]!.device.model.replace(/[^A-Za-z0-9_]/g, "_")}`);
    expect(await adb("shell", "echo", "hi")).toEqual({ code: 0, stdout: "hi\n", stderr: "" });
    expect(await adb("shell", "echo out; echo err >&2; exit 42")).toEqual({ code: 42, stdout: "out\n", stderr: "err\n" });
    expect(await ds.runAdb(user.port, ["-s", endpoint.serial, "shell", "cat"], { input: "through stdin\n" })).toMatchObject({ code: 0, stdout: "through stdin\n" });
    // Streams side by side on one connection.
    const many = await Promise.all([1, 2, 3, 4, 5, 6].map((n) => adb("shell", `echo ${n}`)));
    expect(many.map((r) => r.stdout)).toEqual(["1\n", "2\n", "3\n", "4\n", "5\n", "6\n"]);
  });

  it("pushes and pulls a few MiB byte for byte", async () => {
    const data = randomBytes(5 * 1024 * 1024 + 123);
    await writeFile(join(dir, "up.bin"), data);
    const push = await adb("push", join(dir, "up.bin"), "/data/local/tmp/up.bin");
    expect(push.code, push.stderr).toBe(0);
    expect(push.stdout).toMatch(/1 file pushed/);
    const pull = await adb("pull", "/data/local/tmp/up.bin", join(dir, "down.bin"));
    expect(pull.code, pull.stderr).toBe(0);
    expect(sha256(await readFile(join(dir, "down.bin")))).toBe(sha256(data));
  });

  it("installs an APK and reads logcat", async () => {
    await writeFile(join(dir, "app.apk"), ds.buildSimApk({ name: "com.example.tunnelled" }));
    const install = await adb("install", "-r", join(dir, "app.apk"));
    expect(install).toMatchObject({ code: 0, stdout: expect.stringMatching(/Success\n$/) });
    expect((await adb("shell", "pm list packages com.example.tunnelled")).stdout).toBe("package:com.example.tunnelled\n");
    const logcat = await adb("logcat", "-d");
    expect(logcat.code, logcat.stderr).toBe(0);
    expect(logcat.stdout).toMatch(/^\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} /m);
  });

  it("refuses a stream the backend refuses (adb says closed), and logs why", async () => {
    const refused = await adb("exec-out", "echo", "x");
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/closed/);
    expect(logged.join("\n")).toContain("adb stream exec: refused: exec: is not allowed on this tunnel");
    // The transport is unharmed.
    expect((await adb("shell", "echo", "still")).stdout).toBe("still\n");
  });

  it("once closed, drops the adb server's connection and refuses new ones: the phone is no longer a device", async () => {
    expect(endpoint.connectionCount()).toBe(1);
    await endpoint.close();
    expect(endpoint.connectionCount()).toBe(0);
    await ds.waitForDeviceState(user.port, endpoint.serial, (state) => state !== "device");
    const refused = await new Promise<string>((resolve) => {
      const s = connect({ host: "127.0.0.1", port: endpoint.port });
      s.once("connect", () => {
        s.destroy();
        resolve("connected");
      });
      s.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
    expect(refused).toBe("ECONNREFUSED");
  });
});
