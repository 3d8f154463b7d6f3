import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAdb, startAdbServer, startDevsim, type AdbServer, type Devsim } from "./index.js";

// adb push/pull/ls and adbkit sync against the simulated filesystem, through the real adb 29 server.

const { Adb } = createRequire(import.meta.url)("@devicefarmer/adbkit") as typeof import("@devicefarmer/adbkit");

let server: AdbServer;
let sim: Devsim;
let dir: string;

beforeAll(async () => {
  server = await startAdbServer();
  sim = await startDevsim({ devices: 1, adbPort: server.port });
  dir = await mkdtemp(join(tmpdir(), "devsim-sync-"));
}, 20_000);

afterAll(async () => {
  await sim?.stop();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");
const adb = (args: string[], timeoutMs = 30_000) => runAdb(server.port, ["-s", sim.devices[0]!.serial, ...args], { timeoutMs });

describe("sync through the real adb CLI", () => {
  it("push and pull a 50 MiB file with equal sha256 (device side too)", async () => {
    const data = randomBytes(50 * 1024 * 1024);
    const local = join(dir, "big.bin");
    await writeFile(local, data);
    const push = await adb(["push", local, "/data/local/tmp/big.bin"]);
    expect(push.code, push.stderr).toBe(0);
    expect(push.stdout).toMatch(/1 file pushed/);

    const onDevice = await adb(["shell", "sha256sum /data/local/tmp/big.bin"]);
    expect(onDevice.stdout).toBe(`${sha256(data)}  /data/local/tmp/big.bin\n`);

    const pulled = join(dir, "pulled.bin");
    const pull = await adb(["pull", "/data/local/tmp/big.bin", pulled]);
    expect(pull.code, pull.stderr).toBe(0);
    expect(sha256(await readFile(pulled))).toBe(sha256(data));
  }, 60_000);

  it("push creates parent directories; modes and mtimes survive", async () => {
    const local = join(dir, "small.txt");
    await writeFile(local, "hello sync\n");
    expect((await adb(["push", local, "/sdcard/Download/a/b/small.txt"])).code).toBe(0);
    expect((await adb(["shell", "cat /sdcard/Download/a/b/small.txt"])).stdout).toBe("hello sync\n");
    const ls = await adb(["shell", "ls -l /sdcard/Download/a/b"]);
    expect(ls.stdout).toMatch(/^-rw-r--r-- +1 shell .* 11 \d{4}-\d\d-\d\d \d\d:\d\d small.txt$/m);
  });

  it("adb ls lists entries (LIS2) and pulls of missing or private files fail like adbd", async () => {
    const ls = await adb(["ls", "/sdcard/"]);
    expect(ls.stdout).toMatch(/ Download\n/);
    const missing = await adb(["pull", "/data/local/tmp/nope", join(dir, "x")]);
    expect(missing.code).not.toBe(0);
    expect(missing.stdout + missing.stderr).toMatch(/No such file or directory/);
    const secret = await adb(["pull", "/data/data/com.android.settings/x", join(dir, "y")]);
    expect(secret.code).not.toBe(0);
    expect(secret.stdout + secret.stderr).toMatch(/Permission denied|No such file/);
  });

  it("exec-out streams raw bytes", async () => {
    const bytes = Buffer.from([0, 1, 2, 10, 13, 255, 10]);
    await writeFile(join(dir, "raw.bin"), bytes);
    expect((await adb(["push", join(dir, "raw.bin"), "/data/local/tmp/raw.bin"])).code).toBe(0);
    const out = await new Promise<Buffer>((resolve, reject) => {
      void import("node:child_process").then(({ execFile }) =>
        execFile("adb", ["-P", String(server.port), "-s", sim.devices[0]!.serial, "exec-out", "cat /data/local/tmp/raw.bin"], { encoding: "buffer" }, (error, stdout) => (error ? reject(error) : resolve(stdout)))
      );
    });
    expect(out.equals(bytes)).toBe(true);
  });

  it("storage full: push and shell writes fail with ENOSPC text", async () => {
    const device = sim.devices[0]!.device;
    await writeFile(join(dir, "full.txt"), "x".repeat(1000));
    device.faults.set({ storageFull: true });
    try {
      const push = await adb(["push", join(dir, "full.txt"), "/data/local/tmp/full.txt"]);
      expect(push.code).not.toBe(0);
      expect(push.stdout + push.stderr).toMatch(/No space left on device/);
      const echo = await adb(["shell", "echo hi > /sdcard/full.txt"]);
      expect(echo.code).not.toBe(0);
      expect(echo.stderr).toMatch(/No space left on device/);
    } finally {
      device.faults.set({ storageFull: null });
    }
    expect((await adb(["push", join(dir, "full.txt"), "/data/local/tmp/full.txt"])).code).toBe(0);
  });
});

describe("sync through adbkit", () => {
  it("push, stat, readdir and pull", async () => {
    const client = Adb.createClient({ port: server.port });
    const device = client.getDevice(sim.devices[0]!.serial);
    const data = randomBytes(300_000);
    // A byte stream (not object mode): adbkit then sends DATA chunks of at most 64 KiB, as adbd requires.
    const transfer = await device.push(new PassThrough().end(data), "/data/local/tmp/kit.bin");
    await new Promise<void>((resolve, reject) => transfer.on("end", () => resolve()).on("error", reject));

    const stat = await device.stat("/data/local/tmp/kit.bin");
    expect(stat.size).toBe(data.length);
    expect(stat.isFile()).toBe(true);
    expect(Math.abs(stat.mtimeMs - Date.now())).toBeLessThan(60_000);

    const entries = await device.readdir("/data/local/tmp");
    expect(entries.map((entry: { name: string }) => entry.name)).toContain("kit.bin");

    const pulled = await Adb.util.readAll(await device.pull("/data/local/tmp/kit.bin"));
    expect(sha256(pulled)).toBe(sha256(data));

    await expect(device.stat("/data/local/tmp/none")).rejects.toThrow(/ENOENT|No such file/);
  });
});
