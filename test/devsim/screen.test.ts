import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildSimApk, runAdb, startAdbServer, startDevsim, type AdbServer, type Devsim } from "./index.js";

// The screen model through the real adb CLI and adbkit: PNGs, UIAutomator XML, input, wm, dumpsys, apps.

const require = createRequire(import.meta.url);
const { Adb } = require("@devicefarmer/adbkit") as typeof import("@devicefarmer/adbkit");
const sharp = require("sharp") as typeof import("sharp");

let server: AdbServer;
let sim: Devsim;

beforeAll(async () => {
  server = await startAdbServer();
  sim = await startDevsim({ devices: 1, adbPort: server.port });
}, 20_000);

afterAll(async () => {
  await sim?.stop();
  await server?.stop();
});

const serial = () => sim.devices[0]!.serial;
const adb = (...args: string[]) => runAdb(server.port, ["-s", serial(), ...args]);
const shell = async (command: string) => (await adb("shell", command)).stdout;

function execOut(command: string[]): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    execFile("adb", ["-P", String(server.port), "-s", serial(), "exec-out", ...command], { encoding: "buffer", maxBuffer: 64 * 1024 * 1024 }, (error, stdout) => (error ? reject(error) : resolve(stdout)))
  );
}

interface XmlNode {
  attrs: Record<string, string>;
}

/** Parses `<node …>` elements of a UIAutomator dump into attribute maps. */
function parseDump(xml: string): XmlNode[] {
  expect(xml.startsWith("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=")).toBe(true);
  const opens = (xml.match(/<node /g) ?? []).length;
  const closes = (xml.match(/<\/node>/g) ?? []).length + (xml.match(/ \/>/g) ?? []).length;
  expect(closes).toBe(opens);
  return [...xml.matchAll(/<node ([^>]*?)\s*\/?>/g)].map((match) => ({ attrs: Object.fromEntries([...match[1]!.matchAll(/([\w-]+)="([^"]*)"/g)].map((a) => [a[1]!, a[2]!])) }));
}

function center(bounds: string): [number, number] {
  const [l, t, r, b] = bounds.match(/\d+/g)!.map(Number) as [number, number, number, number];
  return [Math.floor((l + r) / 2), Math.floor((t + b) / 2)];
}

async function dump(): Promise<XmlNode[]> {
  expect(await shell("uiautomator dump")).toBe("UI hierchary dumped to: /sdcard/window_dump.xml\n");
  return parseDump(await shell("cat /sdcard/window_dump.xml"));
}

const byId = (nodes: XmlNode[], id: string) => nodes.find((n) => n.attrs["resource-id"] === id);

beforeEach(async () => {
  const device = sim.devices[0]!.device.state;
  device.display.overrideSize = undefined;
  device.display.overrideDensity = undefined;
  device.display.rotation = 0;
  device.display.screenOn = true;
  device.display.locked = false;
  device.faults.clear();
  await shell("am force-stop com.example.farmdemo; input keyevent HOME");
});

describe("screenshots", () => {
  it("adb exec-out screencap -p decodes with sharp to the display size", async () => {
    const png = await execOut(["screencap", "-p"]);
    const { data, info } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
    expect([info.width, info.height]).toEqual([1080, 2400]);
    expect(data.length).toBe(1080 * 2400 * info.channels);
  });

  it("adbkit screencap() and framebuffer() work", async () => {
    const device = Adb.createClient({ port: server.port }).getDevice(serial());
    const png = await Adb.util.readAll(await device.screencap());
    expect(await sharp(png).metadata()).toMatchObject({ format: "png", width: 1080, height: 2400 });
    const framebuffer = await device.framebuffer("raw");
    expect(framebuffer.meta).toMatchObject({ version: 1, bpp: 32, width: 1080, height: 2400, format: "rgba" });
    expect((await Adb.util.readAll(framebuffer)).length).toBe(1080 * 2400 * 4);
  });

  it("wm size/density overrides and rotation change the PNG and the dumps", async () => {
    expect(await shell("wm size 720x1600 && wm size && wm density 320 && wm density")).toBe("Physical size: 1080x2400\nOverride size: 720x1600\nPhysical density: 420\nOverride density: 320\n");
    expect(await sharp(await execOut(["screencap", "-p"])).metadata()).toMatchObject({ width: 720, height: 1600 });
    await shell("wm size reset; wm density reset; settings put system user_rotation 1");
    expect(await sharp(await execOut(["screencap", "-p"])).metadata()).toMatchObject({ width: 2400, height: 1080 });
    expect(await shell("dumpsys input | grep SurfaceOrientation")).toBe("      SurfaceOrientation: 1\n");
    expect(await shell("dumpsys display | grep mOverrideDisplayInfo")).toMatch(/real 2400 x 1080, .*rotation 1, density 420/);
    expect((await dump())[0]).toBeDefined();
    expect(await shell("cat /sdcard/window_dump.xml")).toContain("<hierarchy rotation=\"1\">");
    await shell("settings put system user_rotation 0");
  });
});

describe("UI tree and input", () => {
  it("uiautomator XML matches the scene, and tapping a checkbox toggles it (PNG differs)", async () => {
    expect(await shell("am start -n com.example.farmdemo/.MainActivity")).toBe("Starting: Intent { cmp=com.example.farmdemo/.MainActivity }\n");
    const before = await dump();
    const box = byId(before, "com.example.farmdemo:id/remember")!;
    expect(box.attrs).toMatchObject({ class: "android.widget.CheckBox", text: "Remember me", checkable: "true", checked: "false", enabled: "true", package: "com.example.farmdemo" });
    expect(byId(before, "com.example.farmdemo:id/delete")!.attrs).toMatchObject({ enabled: "false" });
    const pngBefore = await execOut(["screencap", "-p"]);

    const [x, y] = center(box.attrs["bounds"]!);
    await shell(`input tap ${x} ${y}`);
    expect(byId(await dump(), "com.example.farmdemo:id/remember")!.attrs["checked"]).toBe("true");
    const pngAfter = await execOut(["screencap", "-p"]);
    const [a, b] = await Promise.all([pngBefore, pngAfter].map((png) => sharp(png).extract({ left: x - 500, top: y - 30, width: 200, height: 60 }).raw().toBuffer()));
    expect(a!.equals(b!)).toBe(false);
  });

  it("text input and navigation to another screen; back returns", async () => {
    await shell("am start -n com.example.farmdemo/.MainActivity");
    const nodes = await dump();
    const [nx, ny] = center(byId(nodes, "com.example.farmdemo:id/name")!.attrs["bounds"]!);
    const [bx, by] = center(byId(nodes, "com.example.farmdemo:id/next")!.attrs["bounds"]!);
    await shell(`input tap ${nx} ${ny} && input text Ada && input tap ${bx} ${by}`);
    const after = await dump();
    expect(byId(after, "com.example.farmdemo:id/greeting")!.attrs["text"]).toBe("Welcome, Ada!");
    expect(await shell("dumpsys window | grep mCurrentFocus")).toMatch(/mCurrentFocus=Window\{[0-9a-f]+ u0 com.example.farmdemo\/.WelcomeActivity\}/);
    await shell("input keyevent KEYCODE_BACK");
    expect(byId(await dump(), "com.example.farmdemo:id/name")!.attrs["text"]).toBe("Ada");
  });

  it("screen off and lock show in dumpsys, screencap and uiautomator", async () => {
    await shell("input keyevent 26");
    expect(await shell("dumpsys power | grep -E \"mWakefulness=|Display Power\"")).toBe("  mWakefulness=Asleep\n  Display Power: state=OFF\n");
    const black = await sharp(await execOut(["screencap", "-p"])).stats();
    expect(black.channels.slice(0, 3).every((c) => c.max === 0)).toBe(true);
    const off = await adb("shell", "uiautomator dump");
    expect(off).toMatchObject({ code: 0, stderr: "ERROR: null root node returned by UiTestAutomationBridge.\n" });

    await shell("input keyevent KEYCODE_WAKEUP");
    expect(await shell("dumpsys window | grep mShowingLockscreen")).toContain("mShowingLockscreen=true");
    expect((await dump())[0]!.attrs["package"]).toBe("com.android.systemui");
    await shell("input swipe 540 2000 540 500");
    expect(await shell("dumpsys window | grep mShowingLockscreen")).toContain("mShowingLockscreen=false");
    expect((await dump())[0]!.attrs["package"]).toBe("com.android.launcher3");
  });

  it("the launcher starts apps; unknown activities fail like am", async () => {
    const icon = (await dump()).find((n) => n.attrs["content-desc"] === "Settings")!;
    await shell(`input tap ${center(icon.attrs["bounds"]!).join(" ")}`);
    expect(await shell("dumpsys activity activities | grep mResumedActivity")).toMatch(/com.android.settings\/.Settings/);
    const bad = await adb("shell", "am start -n com.example.farmdemo/.Nope");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe("Error type 3\nError: Activity class {com.example.farmdemo/.Nope} does not exist.\n");
  });
});

describe("apps, processes and settings", () => {
  it("pm list/path/install/uninstall/clear", async () => {
    expect(await shell("pm list packages")).toContain("package:com.example.farmdemo\n");
    expect(await shell("pm path com.example.farmdemo")).toMatch(/^package:\/data\/app\/~~[\w-]+\/com.example.farmdemo-[\w-]+\/base.apk\n$/);
    expect((await adb("shell", "pm path com.nope")).code).toBe(1);
    await shell(`echo 'DEVSIM-APK 1' > /data/local/tmp/a.apk; echo '{"name":"com.example.extra","debuggable":false}' >> /data/local/tmp/a.apk`);
    expect(await shell("pm install -r /data/local/tmp/a.apk")).toBe("Success\n");
    expect(await shell("pm list packages -3")).toContain("package:com.example.extra\n");
    await shell("echo junk > /data/local/tmp/b.apk");
    expect(await shell("pm install /data/local/tmp/b.apk")).toMatch(/^Failure \[INSTALL_PARSE_FAILED_NOT_APK/);
    expect(await shell("pm uninstall com.example.extra")).toBe("Success\n");
    expect(await shell("pm uninstall com.example.extra")).toBe("Failure [DELETE_FAILED_INTERNAL_ERROR]\n");
    const client = Adb.createClient({ port: server.port }).getDevice(serial());
    expect(await client.isInstalled("com.example.farmdemo")).toBe(true);
    expect(await client.clear("com.example.farmdemo")).toBe(true);
  });

  it("adb install / adbkit install of devsim APKs, adb uninstall", async () => {
    const dir = await mkdtemp(join(tmpdir(), "devsim-apk-"));
    try {
      await writeFile(join(dir, "mine.apk"), buildSimApk({ name: "com.example.mine", debuggable: true }));
      const install = await adb("install", "-r", join(dir, "mine.apk"));
      expect(install).toMatchObject({ code: 0, stdout: expect.stringMatching(/Success\n$/) });
      expect(await shell("run-as com.example.mine pwd")).toBe("/data/data/com.example.mine\n");
      await writeFile(join(dir, "kit.apk"), buildSimApk({ name: "com.example.kit" }));
      const client = Adb.createClient({ port: server.port }).getDevice(serial());
      expect(await client.install(join(dir, "kit.apk"))).toBe(true);
      expect(await client.isInstalled("com.example.kit")).toBe(true);
      expect((await adb("uninstall", "com.example.mine")).stdout).toBe("Success\n");
      expect(await shell("pm list packages -3")).toBe("package:com.example.farmdemo\npackage:com.example.kit\n");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("an APK with a launcher activity starts from monkey and shows its screen; one without makes monkey give up", async () => {
    const dir = await mkdtemp(join(tmpdir(), "devsim-apk-"));
    try {
      await writeFile(join(dir, "hello.apk"), buildSimApk({ name: "com.example.hello", label: "Hello App", mainActivity: ".MainActivity" }));
      expect((await adb("install", join(dir, "hello.apk"))).code).toBe(0);
      const started = await adb("shell", "monkey -p com.example.hello -c android.intent.category.LAUNCHER 1");
      expect(started).toMatchObject({ code: 0, stdout: expect.stringContaining("Events injected: 1\n") });
      expect(await shell("dumpsys activity activities | grep mResumedActivity")).toMatch(/com.example.hello\/.MainActivity/);
      expect((await dump()).some((n) => n.attrs["text"] === "Hello from Hello App")).toBe(true);
      const none = await adb("shell", "monkey -p com.example.nope -c android.intent.category.LAUNCHER 1");
      expect(none).toMatchObject({ code: 252, stdout: expect.stringContaining("No activities found to run, monkey aborted.") });
      await shell("am force-stop com.example.hello");
      expect(await shell("dumpsys activity activities | grep mResumedActivity")).not.toMatch(/com.example.hello/);
      expect((await adb("uninstall", "com.example.hello")).stdout).toBe("Success\n");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("run-as: private files only through the app’s uid, with run-as’s refusals", async () => {
    expect(await shell("run-as com.example.farmdemo sh -c 'mkdir -p files && echo s3cret > files/token; pwd; ls files'")).toBe("/data/data/com.example.farmdemo\ntoken\n");
    expect(await adb("shell", "cat /data/data/com.example.farmdemo/files/token")).toMatchObject({ code: 1, stderr: "cat: /data/data/com.example.farmdemo/files/token: Permission denied\n" });
    expect(await shell("run-as com.example.farmdemo cat files/token")).toBe("s3cret\n");
    expect(await adb("shell", "run-as com.android.settings ls")).toMatchObject({ code: 1, stderr: "run-as: package not debuggable: com.android.settings\n" });
    expect(await adb("shell", "run-as com.nope ls")).toMatchObject({ code: 1, stderr: "run-as: unknown package: com.nope\n" });
    sim.devices[0]!.device.faults.set({ runAsDenied: true });
    expect(await adb("shell", "run-as com.example.farmdemo ls")).toMatchObject({ code: 1, stderr: "run-as: package not debuggable: com.example.farmdemo\n" });
  });

  it("ps shows app processes started by am; kill obeys permissions", async () => {
    await shell("am start -n com.example.farmdemo/.MainActivity");
    const ps = await shell("ps -A -o PID,USER,NAME,ARGS,STIME");
    expect(ps.split("\n")[0]).toMatch(/^\s*PID USER\s+NAME ARGS\s+STIME$|^\s*PID USER/);
    const line = ps.split("\n").find((l) => l.includes("com.example.farmdemo"))!;
    expect(line).toMatch(/^\s*\d+ u0_a\d+\s+com.example.farmdemo com.example.farmdemo \d\d:\d\d:\d\d$/);
    const systemServer = (await shell("pidof system_server")).trim();
    expect(await adb("shell", `kill -9 ${systemServer}`)).toMatchObject({ code: 1, stderr: `/system/bin/sh: kill: ${systemServer}: Operation not permitted\n` });
    await shell("am force-stop com.example.farmdemo");
    expect(await shell("ps -A -o NAME")).not.toContain("com.example.farmdemo");
  });

  it("settings get/put and getprop/setprop", async () => {
    expect(await shell("settings get global adb_enabled")).toBe("1\n");
    expect(await shell("settings get secure nope")).toBe("null\n");
    expect(await shell("settings put global stay_on_while_plugged_in 7 && settings get global stay_on_while_plugged_in")).toBe("7\n");
    expect(await shell("setprop debug.farm 1 && getprop debug.farm")).toBe("1\n");
  });
});
