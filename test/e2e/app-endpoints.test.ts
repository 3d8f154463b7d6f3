/**
 * App SDK and WebDriverAgent endpoint discovery: Android through run-as and
 * adb forwards on simulated phones and the real adb server; iOS through a
 * devicectl stand-in and simulated runtimes. Coordinator and agent are
 * separate processes; the agent module is also driven directly where the
 * timing must be exact (an app restarting between discovery and use).
 */
import { readFile, writeFile } from "node:fs/promises";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { androidIdentityHeaders, androidSdkGet, discoverAndroidEndpoint, removeAndroidForward } from "@farm/agent/app-sdk/android-endpoint";
import { sdkGet } from "@farm/agent/app-sdk/sdk-http";
import { adbConnect, runAdb, SimDevice, type AdbServer } from "../devsim/index.js";
import { IosRuntime } from "../fakes/ios-runtime.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";
import type { TempDir } from "../support/temp-dir.js";

const PKG = "com.example.farmdemo";
const IOS_ID = "6A1F3E2B-0C5D-4E7F-9A8B-1C2D3E4F5A6B";
const BUNDLE = "com.example.shop";
const RUNNER = "dev.farm.wda.xctrunner";
// The compiled stand-in (vitest runs this file from source, test/e2e/).
const devicectl = `${process.execPath} ${fileURLToPath(new URL("../dist/fakes/devicectl.js", import.meta.url))}`;

let dir: TempDir;
let adb: AdbServer;
let lab: SplitFarm;
let env: NodeJS.ProcessEnv;
let phone: SimDevice;
let serial: string;
let other: SimDevice;
let otherSerial: string;
const runtimes: IosRuntime[] = [];

const adbAddr = () => ({ host: "127.0.0.1", port: adb.port });
const appEndpoint = (args: string[]) => farm(["app", "endpoint", ...args], env);
const sh = (s: string, cmd: string) => runAdb(adb.port, ["-s", s, "shell", cmd]);

/** Starts the demo app and waits until its SDK's descriptor says ready. */
async function startApp(): Promise<string> {
  await sh(serial, `am start -n ${PKG}/.MainActivity`);
  return waitFor("the SDK ready", async () => {
    const out = (await sh(serial, `run-as ${PKG} cat files/farm_sdk_endpoint.json`)).stdout;
    try {
      const d = JSON.parse(out) as { ok: boolean; runtimeEpoch: string };
      return d.ok && d.runtimeEpoch === phone.state.sdkRuntimeEpoch(PKG) ? d.runtimeEpoch : undefined;
    } catch {
      return undefined;
    }
  });
}

async function writeIosState(devices: object[]): Promise<void> {
  await writeFile(join(dir.path, "devicectl.json"), JSON.stringify({ devices }));
}

beforeAll(async () => {
  lab = await startSplitFarm("app-endpoints", {
    agentName: "mac-lab",
    agentArgs: ["--devicectl", devicectl],
    agentEnv: (d) => ({ FARM_FAKE_DEVICECTL_STATE: join(d.path, "devicectl.json") }),
    // The iPhone exists before the agent first asks devicectl.
    beforeAgent: async (d) => {
      dir = d;
      mkdirSync(join(dir.path, "containers", BUNDLE), { recursive: true });
      mkdirSync(join(dir.path, "containers", RUNNER), { recursive: true });
      await writeIosState([
        {
          identifier: IOS_ID,
          udid: "00008110-001A2B3C4D5E6F70",
          name: "Lab iPhone",
          marketingName: "iPhone 15",
          osVersion: "17.2",
          paired: true,
          tunnelState: "connected",
          tunnelIPAddress: "127.0.0.1",
          developerMode: true,
          ddi: true,
          containers: { [BUNDLE]: join(dir.path, "containers", BUNDLE), [RUNNER]: join(dir.path, "containers", RUNNER) },
        },
      ]);
    },
  });
  ({ adb, env } = lab);
  phone = new SimDevice({ serialno: "SDK0001", props: { "ro.debuggable": "1" } });
  serial = await adbConnect(adb.port, "127.0.0.1", await phone.listen());
  other = new SimDevice({ serialno: "SDK0002" });
  otherSerial = await adbConnect(adb.port, "127.0.0.1", await other.listen());
  await waitFor("the phones and the iPhone", async () => {
    const list = ((await farm(["devices"], env)).json["devices"] ?? []) as { serial: string; state: string }[];
    return [serial, otherSerial, IOS_ID].every((s) => list.some((d) => d.serial === s && d.state === "device")) ? true : undefined;
  });
});

afterAll(async () => {
  for (const r of runtimes) await r.stop();
  await phone?.close();
  await other?.close();
  await lab?.stop();
});

describe("Android app SDK", () => {
  it("finds the endpoint from the app's descriptor, proves it, and reaches the SDK through the forward", async () => {
    const missing = await appEndpoint(["--device", serial, "--package", PKG]);
    expect(missing.json).toMatchObject({ ok: false, code: "bridge_endpoint_discovery_failed" });
    const epoch = await startApp();
    const r = await appEndpoint(["--device", serial, "--package", PKG]);
    expect(r.code).toBe(0);
    const e = r.json["endpoint"] as { runtimeEpoch: string; socketName: string; port: number; forwardCreated: boolean; platform: string };
    expect(e).toMatchObject({ platform: "android", runtimeEpoch: epoch, socketName: `farm-sdk-${epoch}`, forwardCreated: true });
    // The route works for a request with the runtime's identity, and only for it.
    const identity = androidIdentityHeaders({ packageName: PKG, runtimeEpoch: epoch, socketName: e.socketName, version: "", updatedAtMs: 0 });
    const info = await sdkGet("127.0.0.1", e.port, "/v1/info", identity, 3_000);
    expect(info.status).toBe(200);
    expect((await sdkGet("127.0.0.1", e.port, "/v1/info", { ...identity, "x-farm-sdk-epoch": "other" }, 3_000)).status).toBe(409);
    // The exact forward is reused, not duplicated.
    const again = (await appEndpoint(["--device", serial, "--package", PKG])).json["endpoint"] as { port: number; forwardCreated: boolean };
    expect(again).toMatchObject({ port: e.port, forwardCreated: false });
    const forwards = (await runAdb(adb.port, ["forward", "--list"])).stdout.split("\n").filter((l) => l.includes(e.socketName));
    expect(forwards).toHaveLength(1);
  });

  it("refuses every invalid descriptor with the code that names the problem", async () => {
    const epoch = phone.state.sdkRuntimeEpoch(PKG) as string;
    const good = { ok: true, packageName: PKG, runtimeEpoch: epoch, transport: "localabstract", socketName: `farm-sdk-${epoch}`, version: "farm-sdk/1", updatedAtMs: Date.now(), error: null };
    const cases: [Record<string, unknown> | string, string][] = [
      [JSON.stringify({ ...good, schema: "farm.android-sdk-endpoint.v0" }), "bridge_endpoint_invalid"],
      [{ ...good, packageName: "com.example.other" }, "bridge_package_mismatch"],
      [{ ...good, runtimeEpoch: "../../x" }, "bridge_endpoint_invalid"],
      [{ ...good, socketName: "farm-sdk-someone-else" }, "bridge_endpoint_invalid"],
      [{ ...good, transport: "tcp" }, "bridge_endpoint_invalid"],
      [{ ...good, ok: false, error: "starting" }, "bridge_not_ready"],
      [{ ...good, padding: "x".repeat(5_000) }, "bridge_endpoint_invalid"],
      ["not json", "bridge_endpoint_invalid"],
    ];
    for (const [descriptor, code] of cases) {
      phone.state.writeSdkDescriptor(PKG, descriptor);
      const r = await appEndpoint(["--device", serial, "--package", PKG]);
      expect(r.json, JSON.stringify(descriptor).slice(0, 80)).toMatchObject({ ok: false, code, dispatched: false, ambiguous: false });
    }
    phone.state.writeSdkDescriptor(PKG, good);
    expect((await appEndpoint(["--device", serial, "--package", PKG])).code).toBe(0);
    // Bad input is refused before any device is touched.
    expect((await appEndpoint(["--device", serial, "--package", "not a package"])).json).toMatchObject({ ok: false, code: "bridge_endpoint_invalid", field: "package", dispatched: false, ambiguous: false });
  });

  it("reports run-as refused as a discovery failure", async () => {
    phone.faults.set({ runAsDenied: true });
    const r = await appEndpoint(["--device", serial, "--package", PKG]);
    expect(r.json).toMatchObject({ ok: false, code: "bridge_endpoint_discovery_failed" });
    expect(String(r.json["message"])).toContain("run-as");
    phone.faults.set({ runAsDenied: null });
  });

  it("rejects an endpoint whose app restarted before use, and rediscovers the new runtime", async () => {
    const before = await discoverAndroidEndpoint(adbAddr(), serial, PKG);
    await sh(serial, `am force-stop ${PKG}`);
    const epoch = await startApp();
    expect(epoch).not.toBe(before.runtimeEpoch);
    // The old route is dead, and the new runtime refuses the old identity.
    await expect(sdkGet("127.0.0.1", before.hostPort, "/v1/info", androidIdentityHeaders(before), 2_000)).rejects.toThrow();
    const fresh = await discoverAndroidEndpoint(adbAddr(), serial, PKG);
    expect((await sdkGet("127.0.0.1", fresh.hostPort, "/v1/info", androidIdentityHeaders(before), 2_000)).status).toBe(409);
    const r = await androidSdkGet(adbAddr(), serial, PKG, "/v1/info", 5_000, before);
    expect(r.rediscovered).toBe(true);
    expect(r.endpoint.runtimeEpoch).toBe(epoch);
    expect(r.body["runtimeBinding"]).toEqual({ packageName: PKG, runtimeEpoch: epoch });
  });

  it("does not reuse a stale forward, and removes a forward only for its own serial", async () => {
    const stale = Number((await runAdb(adb.port, ["-s", serial, "forward", "tcp:0", "localabstract:farm-sdk-0000dead"])).stdout.trim());
    const e = (await appEndpoint(["--device", serial, "--package", PKG])).json["endpoint"] as { port: number };
    expect(e.port).not.toBe(stale);
    const foreign = await farm(["app", "remove-forward", "--device", otherSerial, "--port", String(stale)], env);
    expect(foreign.json).toMatchObject({ ok: false, code: "bridge_forward_not_owned" });
    expect((await farm(["app", "remove-forward", "--device", serial, "--port", String(stale)], env)).code).toBe(0);
    expect((await runAdb(adb.port, ["forward", "--list"])).stdout).not.toContain(`tcp:${stale} `);
    await expect(removeAndroidForward(adbAddr(), serial, stale)).rejects.toThrow(/no forward/);
  });

  it("captures evidence with the app's own tree as the hierarchy, and says so", async () => {
    const out = join(dir.path, "bundle");
    const r = await farm(["evidence", "capture", "--device", serial, "--app-package", PKG, "--output-dir", out], env);
    // The CLI's answer names what failed.
    expect(r.code, r.stdout).toBe(0);
    const m = JSON.parse(await readFile(join(out, "manifest.json"), "utf8")) as { device: { hierarchySource: string; appPackage: string }; artifacts: { kind: string; path: string; mimeType: string }[] };
    expect(m.device).toMatchObject({ hierarchySource: "app-sdk", appPackage: PKG });
    expect(m.artifacts.find((a) => a.kind === "hierarchy")).toMatchObject({ path: "hierarchy.json", mimeType: "application/json" });
    const tree = JSON.parse(await readFile(join(out, "hierarchy.json"), "utf8")) as { package: string; runtimeBinding: { runtimeEpoch: string } };
    expect(tree.package).toBe(PKG);
    expect(tree.runtimeBinding.runtimeEpoch).toBe(phone.state.sdkRuntimeEpoch(PKG));
    // The app not running: no silent fallback to UIAutomator.
    await sh(serial, `am force-stop ${PKG}`);
    const partial = await farm(["evidence", "capture", "--device", serial, "--app-package", PKG], env);
    expect(partial.code).toBe(1);
    expect(JSON.stringify(partial.json["errors"])).toMatch(/bridge_(not_ready|endpoint_discovery_failed)/);
  });
});

describe("iOS SDK and WebDriverAgent", () => {
  it("lists the iPhone as its own platform, leasable like any phone", async () => {
    const d = ((await farm(["devices"], env)).json["devices"] as { serial: string; state: string; properties: { platform: string; model: string; physicalId: string } }[]).find((x) => x.serial === IOS_ID);
    expect(d).toMatchObject({ state: "device", properties: { platform: "ios", model: "iPhone 15", physicalId: "ios-00008110-001A2B3C4D5E6F70" } });
    const lease = await farm(["lease", "acquire", "--device", IOS_ID], env);
    expect(lease.code).toBe(0);
    expect((await farm(["lease", "release", "--lease", (lease.json["lease"] as { token: string }).token], env)).code).toBe(0);
  });

  it("verifies the app's runtime from its container descriptor and the identity of its replies", async () => {
    const sdk = new IosRuntime({ container: join(dir.path, "containers", BUNDLE), bundleId: BUNDLE, schemaVersion: "farm.ios-runtime/v1", descriptor: "Documents/farm_sdk_runtime.json", statusPath: "/v1/status" });
    runtimes.push(sdk);
    await sdk.start();
    const r = await appEndpoint(["--device", IOS_ID, "--bundle-id", BUNDLE]);
    expect(r.code).toBe(0);
    expect(r.json["endpoint"]).toMatchObject({ platform: "ios", kind: "sdk", app: BUNDLE, runtimeEpoch: sdk.runtimeEpoch, host: "127.0.0.1", port: sdk.port, processId: sdk.processId });

    const good = { ...sdk.binding(), ok: true };
    const cases: [Record<string, unknown> | string, string][] = [
      [{ ...good, schemaVersion: "farm.ios-runtime/v0" }, "bridge_endpoint_invalid"],
      [{ ...good, bundleId: "com.example.other" }, "bridge_package_mismatch"],
      [{ ...good, ok: false, port: 0, reason: "waiting for the listener" }, "bridge_not_ready"],
      [{ ...good, port: 0 }, "bridge_endpoint_invalid"],
      [{ ...good, port: 70_000 }, "bridge_endpoint_invalid"],
      [{ ...good, processId: "4242" }, "bridge_endpoint_invalid"],
      [{ ...good, runtimeEpoch: "" }, "bridge_endpoint_invalid"],
      [{ ...good, padding: "x".repeat(5_000) }, "bridge_endpoint_invalid"],
      // Another epoch than the runtime's: it refuses the identity headers.
      [{ ...good, runtimeEpoch: "epoch-stale" }, "bridge_identity_mismatch"],
    ];
    for (const [descriptor, code] of cases) {
      sdk.publish(descriptor);
      const bad = await appEndpoint(["--device", IOS_ID, "--bundle-id", BUNDLE]);
      expect(bad.json, JSON.stringify(descriptor).slice(0, 100)).toMatchObject({ ok: false, code });
    }
    sdk.publish(good);
    // A runtime whose replies name another process is not trusted either.
    sdk.lieAbout = { processId: 1 };
    expect((await appEndpoint(["--device", IOS_ID, "--bundle-id", BUNDLE])).json).toMatchObject({ ok: false, code: "bridge_identity_mismatch" });
    sdk.lieAbout = undefined;
    expect((await appEndpoint(["--device", IOS_ID, "--bundle-id", BUNDLE])).code).toBe(0);
    // No descriptor in the container at all.
    expect((await appEndpoint(["--device", IOS_ID, "--bundle-id", "com.example.absent"])).json).toMatchObject({ ok: false, code: "bridge_endpoint_discovery_failed" });
  });

  it("finds WebDriverAgent through its Runner's container, not the app's", async () => {
    const wda = new IosRuntime({ container: join(dir.path, "containers", RUNNER), bundleId: RUNNER, schemaVersion: "farm.ios-wda/v1", descriptor: "Documents/farm_wda.json", statusPath: "/status", processId: 777 });
    runtimes.push(wda);
    await wda.start();
    const r = await appEndpoint(["--device", IOS_ID, "--wda-runner", RUNNER]);
    expect(r.code).toBe(0);
    expect(r.json["endpoint"]).toMatchObject({ platform: "ios", kind: "wda", app: RUNNER, port: wda.port, processId: 777 });
    // WDA is iOS only.
    expect((await appEndpoint(["--device", serial, "--wda-runner", RUNNER])).json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT" });
  });

  it("reports an iPhone without a tunnel as offline, and refuses discovery on it", async () => {
    const state = JSON.parse(await readFile(join(dir.path, "devicectl.json"), "utf8")) as { devices: { tunnelState: string }[] };
    state.devices[0]!.tunnelState = "disconnected";
    await writeIosState(state.devices);
    await waitFor("the iPhone offline", async () => (((await farm(["devices"], env)).json["devices"] as { serial: string; state: string }[]).find((d) => d.serial === IOS_ID)?.state === "offline" ? true : undefined));
    expect((await appEndpoint(["--device", IOS_ID, "--bundle-id", BUNDLE])).json).toMatchObject({ ok: false, code: "bridge_endpoint_discovery_failed" });
  });
});
