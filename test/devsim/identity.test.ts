import { createRequire } from "node:module";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EMULATOR_PROFILE } from "./device/device-profiles.js";
import { runAdb, startAdbServer, startDevsim, type AdbServer, type Devsim } from "./index.js";

// Identity: serials, product/build props, emulator flags, one phone behind two adb serials, duplicate "0000" serials.

const { Adb } = createRequire(import.meta.url)("@devicefarmer/adbkit") as typeof import("@devicefarmer/adbkit");

let server: AdbServer;
let sim: Devsim;

beforeAll(async () => {
  server = await startAdbServer();
  sim = await startDevsim({
    adbPort: server.port,
    devices: [
      { serialno: "PHYS0001", serials: 2 },
      { serialno: "0000" },
      { serialno: "0000", profile: EMULATOR_PROFILE },
    ],
  });
}, 20_000);

afterAll(async () => {
  await sim?.stop();
  await server?.stop();
});

const shell = async (serial: string, command: string) => (await runAdb(server.port, ["-s", serial, "shell", command])).stdout;

describe("identity", () => {
  it("one phone on two ports: two adb serials, one state (props, boot id, files)", async () => {
    const [a, b] = sim.devices;
    expect(a!.device).toBe(b!.device);
    expect(a!.serial).not.toBe(b!.serial);
    const { stdout } = await runAdb(server.port, ["devices"]);
    expect(stdout).toContain(`${a!.serial}\tdevice`);
    expect(stdout).toContain(`${b!.serial}\tdevice`);
    const client = Adb.createClient({ port: server.port });
    const [propsA, propsB] = await Promise.all([client.getDevice(a!.serial).getProperties(), client.getDevice(b!.serial).getProperties()]);
    expect(propsA["ro.serialno"]).toBe("PHYS0001");
    expect(propsB["ro.boot.serialno"]).toBe("PHYS0001");
    expect(await shell(a!.serial, "cat /proc/sys/kernel/random/boot_id")).toBe(await shell(b!.serial, "cat /proc/sys/kernel/random/boot_id"));
    await shell(a!.serial, "echo via-a > /data/local/tmp/shared.txt");
    expect(await shell(b!.serial, "cat /data/local/tmp/shared.txt")).toBe("via-a\n");
  });

  it("two phones sharing ro.serialno \"0000\" have different boot ids", async () => {
    const [, , c, d] = sim.devices;
    expect(await shell(c!.serial, "getprop ro.serialno")).toBe("0000\n");
    expect(await shell(d!.serial, "getprop ro.serialno")).toBe("0000\n");
    expect(await shell(c!.serial, "cat /proc/sys/kernel/random/boot_id")).not.toBe(await shell(d!.serial, "cat /proc/sys/kernel/random/boot_id"));
  });

  it("product, build and emulator properties", async () => {
    const [phone, , , emulator] = sim.devices;
    const props = await Adb.createClient({ port: server.port }).getDevice(phone!.serial).getProperties();
    expect(props).toMatchObject({ "ro.product.manufacturer": "Google", "ro.product.model": "Pixel 7", "ro.product.device": "panther", "ro.build.version.sdk": "34", "ro.build.version.release": "14" });
    expect(props["ro.kernel.qemu"]).toBeUndefined();
    expect(await shell(emulator!.serial, "getprop ro.kernel.qemu; getprop ro.boot.qemu; getprop ro.hardware")).toBe("1\n1\nranchu\n");
  });
});
