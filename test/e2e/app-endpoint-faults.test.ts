/**
 * App endpoint discovery when the far end misbehaves: an iOS runtime whose
 * status reply does not say ok, an Android proof that fails after the adb
 * forward was made, and an SDK that keeps its connection alive but never
 * finishes an answer. Real agent, coordinator, adb server and simulated
 * phone; the agent module is also driven directly where the timing must
 * be measured without a CLI process in between.
 */
import { mkdirSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { androidSdkGet, discoverAndroidEndpoint } from "@farm/agent/app-sdk/android-endpoint";
import { adbConnect, runAdb, SimDevice, type AdbServer } from "../devsim/index.js";
import { IosRuntime } from "../fakes/ios-runtime.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";
import type { TempDir } from "../support/temp-dir.js";

const PKG = "com.example.farmdemo";
const IOS_ID = "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0";
const BUNDLE = "com.example.shop";
const RUNNER = "dev.farm.wda.xctrunner";
const devicectl = `${process.execPath} ${fileURLToPath(new URL("../dist/fakes/devicectl.js", import.meta.url))}`;
/** What a budget may be overrun by: timers, the forward's removal, loopback. */
const SLACK_MS = 700;

let dir: TempDir;
let adb: AdbServer;
let lab: SplitFarm;
let env: NodeJS.ProcessEnv;
let phone: SimDevice;
let serial: string;
const runtimes: IosRuntime[] = [];
const servers: Server[] = [];

const adbAddr = () => ({ host: "127.0.0.1", port: adb.port });
const appEndpoint = (args: string[]) => farm(["app", "endpoint", ...args], env);
const sh = (cmd: string) => runAdb(adb.port, ["-s", serial, "shell", cmd]);

/** The adb forwards (whole lines) that point at this device socket. */
async function forwardsTo(socketName: string): Promise<string[]> {
  return (await runAdb(adb.port, ["forward", "--list"])).stdout.split("\n").filter((l) => l.trim().endsWith(`localabstract:${socketName}`));
}

/** (Re)starts the demo app and waits until its SDK's descriptor says ready. */
async function startApp(): Promise<string> {
  await sh(`am force-stop ${PKG}`);
  await sh(`am start -n ${PKG}/.MainActivity`);
  return waitFor("the SDK ready", async () => {
    const out = (await sh(`run-as ${PKG} cat files/farm_sdk_endpoint.json`)).stdout;
    try {
      const d = JSON.parse(out) as { ok: boolean; runtimeEpoch: string };
      return d.ok && d.runtimeEpoch === phone.state.sdkRuntimeEpoch(PKG) ? d.runtimeEpoch : undefined;
    } catch {
      return undefined;
    }
  });
}

/** How long a call took to settle; `hung` when it had not after guardMs (the test then fails instead of hanging). */
async function timed(p: Promise<unknown>, guardMs: number): Promise<{ ms: number; error: unknown; hung: boolean }> {
  const t0 = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<{ hung: true }>((resolve) => (timer = setTimeout(() => resolve({ hung: true }), guardMs)));
  const r = await Promise.race([p.then(() => ({ error: undefined }), (error: unknown) => ({ error })), guard]);
  clearTimeout(timer);
  return { ms: Date.now() - t0, error: "error" in r ? r.error : undefined, hung: "hung" in r };
}

const codeOf = (err: unknown) => (err as { details?: { value?: { code?: string } }[] } | undefined)?.details?.[0]?.value?.code ?? String((err as Error | undefined)?.message);

beforeAll(async () => {
  lab = await startSplitFarm("app-endpoint-faults", {
    agentName: "mac-lab",
    agentArgs: ["--devicectl", devicectl],
    agentEnv: (d) => ({ FARM_FAKE_DEVICECTL_STATE: join(d.path, "devicectl.json") }),
    beforeAgent: async (d) => {
      dir = d;
      for (const b of [BUNDLE, RUNNER]) mkdirSync(join(dir.path, "containers", b), { recursive: true });
      const iphone = {
        identifier: IOS_ID,
        udid: "00008110-000F1E2D3C4B5A69",
        name: "Lab iPhone",
        marketingName: "iPhone 15",
        osVersion: "17.2",
        paired: true,
        tunnelState: "connected",
        tunnelIPAddress: "127.0.0.1",
        developerMode: true,
        ddi: true,
        containers: { [BUNDLE]: join(dir.path, "containers", BUNDLE), [RUNNER]: join(dir.path, "containers", RUNNER) },
      };
      await writeFile(join(dir.path, "devicectl.json"), JSON.stringify({ devices: [iphone] }));
    },
  });
  ({ adb, env } = lab);
  phone = new SimDevice({ serialno: "SDKF001", props: { "ro.debuggable": "1" } });
  serial = await adbConnect(adb.port, "127.0.0.1", await phone.listen());
  await waitFor("the phone and the iPhone", async () => {
    const list = ((await farm(["devices"], env)).json["devices"] ?? []) as { serial: string; state: string }[];
    return [serial, IOS_ID].every((s) => list.some((d) => d.serial === s && d.state === "device")) ? true : undefined;
  });
});

afterEach(() => {
  phone?.faults.clear();
});

afterAll(async () => {
  for (const r of runtimes) await r.stop();
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
  await phone?.close();
  await lab?.stop();
});

describe("iOS: only a status reply that says ok:true verifies an endpoint", () => {
  it("refuses WebDriverAgent and SDK status replies without a boolean ok, or with ok:false, as bridge_not_ready", async () => {
    const wda = new IosRuntime({ container: join(dir.path, "containers", RUNNER), bundleId: RUNNER, schemaVersion: "farm.ios-wda/v1", descriptor: "Documents/farm_wda.json", statusPath: "/status", processId: 777 });
    const sdk = new IosRuntime({ container: join(dir.path, "containers", BUNDLE), bundleId: BUNDLE, schemaVersion: "farm.ios-runtime/v1", descriptor: "Documents/farm_sdk_runtime.json", statusPath: "/v1/status" });
    runtimes.push(wda, sdk);
    await wda.start();
    await sdk.start();
    const bodies: Record<string, unknown>[] = [
      { ready: true }, // WebDriverAgent's usual shape, no ok
      { value: { ready: true }, sessionId: null },
      { ok: false, ready: false },
      { ok: "true" },
    ];
    for (const body of bodies) {
      wda.statusBody = body;
      const r = await appEndpoint(["--device", IOS_ID, "--wda-runner", RUNNER]);
      expect(r.json, `WDA ${JSON.stringify(body)}`).toMatchObject({ ok: false, code: "bridge_not_ready" });
    }
    for (const body of [{ ready: true }, { ok: false, error: "launching" }]) {
      sdk.statusBody = body;
      const s = await appEndpoint(["--device", IOS_ID, "--bundle-id", BUNDLE]);
      expect(s.json, `SDK ${JSON.stringify(body)}`).toMatchObject({ ok: false, code: "bridge_not_ready" });
    }
    wda.statusBody = { ok: true, ready: true };
    sdk.statusBody = { ok: true };
    expect((await appEndpoint(["--device", IOS_ID, "--wda-runner", RUNNER])).json).toMatchObject({ endpoint: { kind: "wda", port: wda.port, processId: 777 } });
    expect((await appEndpoint(["--device", IOS_ID, "--bundle-id", BUNDLE])).json).toMatchObject({ endpoint: { kind: "sdk", port: sdk.port } });
  });
});

describe("Android: a failed discovery leaves no forward it made", () => {
  it("removes the forward when nothing answers behind it (the app stopped, its descriptor stale)", async () => {
    const epoch = await startApp();
    await sh(`am force-stop ${PKG}`);
    const r = await appEndpoint(["--device", serial, "--package", PKG]);
    expect(r.json).toMatchObject({ ok: false, code: "bridge_not_ready" });
    expect(await forwardsTo(`farm-sdk-${epoch}`)).toEqual([]);
  });

  it("removes the forward when the runtime behind it is another one, and leaves a forward it only reused", async () => {
    // A confused runtime: it serves the socket the descriptor names, but answers as another epoch.
    const epoch = "confused-1";
    const server = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ runtimeBinding: { packageName: PKG, runtimeEpoch: "someone-else" } }));
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const socketName = `farm-sdk-${epoch}`;
    phone.state.sockets.registerPort(`localabstract:${socketName}`, (server.address() as AddressInfo).port);
    phone.state.writeSdkDescriptor(PKG, { ok: true, packageName: PKG, runtimeEpoch: epoch, transport: "localabstract", socketName, version: "farm-sdk/1", updatedAtMs: Date.now(), error: null });
    try {
      const r = await appEndpoint(["--device", serial, "--package", PKG]);
      expect(r.json).toMatchObject({ ok: false, code: "bridge_identity_mismatch" });
      expect(await forwardsTo(socketName)).toEqual([]);
      // Someone else's forward to the same socket is reused, and not this call's to remove.
      const theirs = Number((await runAdb(adb.port, ["-s", serial, "forward", "tcp:0", `localabstract:${socketName}`])).stdout.trim());
      expect((await appEndpoint(["--device", serial, "--package", PKG])).json).toMatchObject({ ok: false, code: "bridge_identity_mismatch" });
      expect(await forwardsTo(socketName)).toEqual([`${serial} tcp:${theirs} localabstract:${socketName}`]);
      await runAdb(adb.port, ["-s", serial, "forward", "--remove", `tcp:${theirs}`]);
    } finally {
      phone.state.sockets.unregister(`localabstract:${socketName}`);
    }
  });
});

describe("Android: SDK requests and discovery end within the caller's budget", () => {
  it("gives up on an SDK that trickles its answer when the discovery budget is spent, and removes its forward", async () => {
    const epoch = await startApp();
    phone.faults.set({ sdkTrickleMs: 100 });
    const r = await timed(discoverAndroidEndpoint(adbAddr(), serial, PKG, 2_000), 10_000);
    expect(r.hung, "discovery never ended").toBe(false);
    expect(codeOf(r.error)).toBe("bridge_not_ready");
    expect(r.ms).toBeLessThan(2_000 + SLACK_MS);
    expect(await forwardsTo(`farm-sdk-${epoch}`)).toEqual([]);
  });

  it("ends a request to a known endpoint at its total deadline, not when the connection goes idle", async () => {
    await startApp();
    const known = await discoverAndroidEndpoint(adbAddr(), serial, PKG, 5_000);
    phone.faults.set({ sdkTrickleMs: 100 });
    const r = await timed(androidSdkGet(adbAddr(), serial, PKG, "/v1/info", 2_000, known), 10_000);
    expect(r.hung, "the request never ended").toBe(false);
    expect(r.error).toBeDefined();
    expect(r.ms).toBeLessThan(2_000 + SLACK_MS);
  });

  it("keeps the one rediscovery after an app restart inside the same budget", async () => {
    await startApp();
    const known = await discoverAndroidEndpoint(adbAddr(), serial, PKG, 5_000);
    const epoch = await startApp();
    expect(epoch).not.toBe(known.runtimeEpoch);
    phone.faults.set({ sdkTrickleMs: 100 });
    const r = await timed(androidSdkGet(adbAddr(), serial, PKG, "/v1/info", 2_500, known), 12_000);
    expect(r.hung, "the rediscovery never ended").toBe(false);
    expect(codeOf(r.error)).toBe("bridge_not_ready");
    expect(r.ms).toBeLessThan(2_500 + SLACK_MS);
    expect(await forwardsTo(`farm-sdk-${epoch}`)).toEqual([]);
  });

  it("bounds the descriptor read by the same budget", async () => {
    phone.faults.set({ hangServices: ["shell"] });
    const r = await timed(discoverAndroidEndpoint(adbAddr(), serial, PKG, 1_500), 10_000);
    expect(r.hung).toBe(false);
    expect(codeOf(r.error)).toBe("bridge_endpoint_discovery_failed");
    expect(r.ms).toBeLessThan(1_500 + SLACK_MS);
  });

  it("answers `farm app endpoint --timeout T` with what the agent found, within T", async () => {
    const epoch = await startApp();
    phone.faults.set({ sdkTrickleMs: 100 });
    const t0 = Date.now();
    const r = await appEndpoint(["--device", serial, "--package", PKG, "--timeout", "3000"]);
    const ms = Date.now() - t0;
    // The agent's own answer, not a bare timeout from a hop that gave up waiting for it.
    expect(r.json).toMatchObject({ ok: false, code: "bridge_not_ready" });
    // Includes starting the CLI process.
    expect(ms).toBeLessThan(3_000 + 1_500);
    expect(await forwardsTo(`farm-sdk-${epoch}`)).toEqual([]);
  });
});
