import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { Errors, farmError } from "@farm/shared/errors";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { serveTunnel, type ConnectResult } from "./tunnel-serve.js";
import { isRunning, readTunnelStates, statePath } from "./tunnel-state.js";
import { startFakeTunnelService, type FakeTunnelService } from "./testing/fake-tunnel-service.js";
import { loadDevsim, openThroughAdbServer, type AdbServerHandle, type DevsimApi } from "./testing/devsim-lab.js";

// The CLI's side of remote adb against a stand-in coordinator speaking
// AdbTunnelService over real gRPC, whose adb streams reach a devsim phone
// through a lab adb server; the user's adb server is a second real one.
// The background mode runs the built CLI (cli/dist, `npx tsc -b`): `farm adb connect` serves its tunnel with this module.

const farmMain = fileURLToPath(new URL("../../../cli/dist/main.js", import.meta.url));

let ds: DevsimApi;
let lab: AdbServerHandle;
let user: AdbServerHandle;
let sim: Awaited<ReturnType<DevsimApi["startDevsim"]>>;
let labSerial: string;
let coordinator: FakeTunnelService;
let home: string;

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** The environment of a `farm` run: this test's FARM_HOME and adb server, no config file, a token. */
function farmEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env["PATH"],
    HOME: home,
    FARM_HOME: home,
    FARM_CONFIG: join(home, "no-config.json"),
    FARM_TOKEN: "farmu_test",
    FARM_COORDINATOR: coordinator.url,
    ANDROID_ADB_SERVER_PORT: String(user.port),
    ...extra,
  };
}

function farm(args: string[], env: NodeJS.ProcessEnv = farmEnv()): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [farmMain, ...args, "-o", "json"], { env, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: typeof error?.code === "number" ? error.code : error ? -1 : 0, stdout, stderr });
    });
    child.stdin?.end();
  });
}

/** Running, not a zombie: the background process is reparented when `farm adb connect` exits, and reaped whenever its new parent gets to it. */
const alive = (pid: number) => isRunning(pid);

/** Another process's exit has no event to await here: poll it. */
async function exited(pid: number, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await delay(25);
  }
  return true;
}

beforeAll(async () => {
  ds = await loadDevsim();
  [lab, user] = await Promise.all([ds.startAdbServer(), ds.startAdbServer()]);
  sim = await ds.startDevsim({ devices: 1, adbPort: lab.port });
  labSerial = sim.devices[0]!.serial;
  coordinator = await startFakeTunnelService({ serial: labSerial, openOnDevice: (service) => openThroughAdbServer(lab.port, labSerial, service) });
  home = await mkdtemp(join(tmpdir(), "farm-adb-"));
});

afterAll(async () => {
  // Whatever a failed test left serving.
  for (const s of home ? await readTunnelStates({ FARM_HOME: home }) : []) if (alive(s.pid) && s.pid !== process.pid) process.kill(s.pid, "SIGKILL");
  await coordinator?.stop();
  await sim?.stop();
  await Promise.all([user?.stop(), lab?.stop()]);
  if (home) await rm(home, { recursive: true, force: true });
});

/** `farm adb connect --foreground` against the coordinator at `url`: resolves once the phone is in the user's adb, with the run still going. */
async function serveInForeground(url: string, env: NodeJS.ProcessEnv, stopSignal: AbortSignal): Promise<{ serving: ReturnType<typeof serveTunnel>; r: ConnectResult }> {
  let ready: (r: ConnectResult) => void = () => undefined;
  const isReady = new Promise<ConnectResult>((resolve) => (ready = resolve));
  const serving = serveTunnel({
    config: { coordinator: url, coordinatorSource: "test", token: "farmu_test", caFile: undefined, insecure: false },
    leaseToken: "farml_test",
    serial: labSerial,
    agent: undefined,
    port: 0,
    adb: { serverPort: user.port },
    timeoutMs: 10_000,
    env,
    foreground: true,
    logFile: null,
    stopSignal,
    log: () => undefined,
    onReady: ready,
  });
  const r = await Promise.race([isReady, serving.then((o) => Promise.reject(new Error(`ended before ready: ${JSON.stringify(o)}`)))]);
  return { serving, r };
}

describe("farm adb connect, through a tunnel over gRPC", () => {
  it("serves the phone through OpenAdbStream; when the farm closes the tunnel, the phone leaves adb within 2 s and the reason comes back", async () => {
    const stop = new AbortController();
    const env = { FARM_HOME: home };
    const { serving, r } = await serveInForeground(coordinator.url, env, stop.signal);
    expect(r).toMatchObject({ device: labSerial, lease: "lease-1", serial: expect.stringMatching(/^127\.0\.0\.1:\d+$/) });
    expect(coordinator.leaseHeaders.at(-1)).toBe("farml_test");
    expect((await readTunnelStates(env)).map((s) => [s.tunnelId, s.serial, s.pid])).toEqual([[r.tunnel, r.serial, process.pid]]);

    const adb = (...args: string[]) => ds.runAdb(user.port, ["-s", r.serial, ...args], { timeoutMs: 60_000 });
    expect(await adb("shell", "echo hi; exit 3")).toEqual({ code: 3, stdout: "hi\n", stderr: "" });
    const dir = await mkdtemp(join(tmpdir(), "farm-adb-files-"));
    try {
      const data = randomBytes(3 * 1024 * 1024 + 7);
      await writeFile(join(dir, "up.bin"), data);
      expect((await adb("push", join(dir, "up.bin"), "/data/local/tmp/t.bin")).code).toBe(0);
      expect((await adb("pull", "/data/local/tmp/t.bin", join(dir, "down.bin"))).code).toBe(0);
      expect(sha256(await readFile(join(dir, "down.bin")))).toBe(sha256(data));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }

    // The next stream's call is open ahead of need, its first message not sent: one, however many streams ran.
    await vi.waitFor(() => expect(coordinator.waitingStreamCalls()).toBe(1), { timeout: 10_000, interval: 20 });
    const closedAt = Date.now();
    coordinator.close(r.tunnel, farmError(Errors.LEASE_RELEASED, "the lease lease-1 on phys-1 was released: the remote adb tunnel is closed", "lease"));
    const outcome = await serving;
    // The spare went with the tunnel.
    await vi.waitFor(() => expect(coordinator.waitingStreamCalls()).toBe(0), { timeout: 10_000, interval: 20 });
    expect(Date.now() - closedAt).toBeLessThan(2_000);
    expect(outcome).toMatchObject({ code: 1, reason: { code: "LEASE_RELEASED", message: expect.stringContaining("was released") } });
    expect(await ds.waitForDeviceState(user.port, r.serial, "gone")).toBeUndefined();
    expect(existsSync(statePath(env, r.tunnel))).toBe(false);
  });

  it("a coordinator that dies mid-tunnel is COORDINATOR_UNAVAILABLE (field coordinator), not a generic error, and the phone leaves adb", async () => {
    // A coordinator of its own: this one is killed (its connections destroyed, as when its process dies).
    const doomed = await startFakeTunnelService({ serial: labSerial, openOnDevice: (service) => openThroughAdbServer(lab.port, labSerial, service) });
    const { serving, r } = await serveInForeground(doomed.url, { FARM_HOME: home }, new AbortController().signal);
    await doomed.stop();
    const outcome = await serving;
    expect(outcome).toMatchObject({ code: 1, reason: { code: "COORDINATOR_UNAVAILABLE", field: "coordinator", message: expect.stringContaining(`lost the coordinator at ${doomed.url}`) } });
    expect(await ds.waitForDeviceState(user.port, r.serial, "gone")).toBeUndefined();
    expect(existsSync(statePath({ FARM_HOME: home }, r.tunnel))).toBe(false);
  });

  it("in the background: prints the serial and returns; list shows it; disconnect stops the process and adb forgets the phone", async () => {
    // --lease alone: the lease says which phone.
    const connected = await farm(["adb", "connect"], farmEnv({ FARM_LEASE: "farml_test" }));
    expect(connected.code, connected.stdout + connected.stderr).toBe(0);
    const out = JSON.parse(connected.stdout) as { ok: boolean; serial: string; device: string; tunnel: string; lease: string; pid: number };
    expect(out).toMatchObject({ ok: true, device: labSerial, lease: "lease-1", serial: expect.stringMatching(/^127\.0\.0\.1:\d+$/) });
    expect(alive(out.pid)).toBe(true);
    expect((await ds.runAdb(user.port, ["-s", out.serial, "shell", "echo", "from-background"])).stdout).toBe("from-background\n");

    const listed = JSON.parse((await farm(["adb", "list", "--coordinator", coordinator.url])).stdout) as { tunnels: { tunnel: string; local: string | null; pid: number | null }[] };
    expect(listed.tunnels).toEqual([expect.objectContaining({ tunnel: out.tunnel, local: out.serial, pid: out.pid })]);
    // The fake serves one tunnel per page: with two more (opened elsewhere), the list follows every page.
    const own = coordinator.tunnels.get(out.tunnel);
    for (const id of ["t-other-1", "t-other-2"]) coordinator.tunnels.set(id, { ...own, tunnelId: id } as NonNullable<typeof own>);
    const paged = JSON.parse((await farm(["adb", "list", "--coordinator", coordinator.url])).stdout) as typeof listed;
    expect(paged.tunnels.map((t) => t.tunnel)).toEqual([out.tunnel, "t-other-1", "t-other-2"]);
    for (const id of ["t-other-1", "t-other-2"]) coordinator.tunnels.delete(id);

    const dropped = await farm(["adb", "disconnect", "--device", out.serial]);
    expect(JSON.parse(dropped.stdout)).toEqual({ ok: true, disconnected: [{ tunnel: out.tunnel, serial: out.serial, device: labSerial }] });
    expect(alive(out.pid)).toBe(false);
    expect(await ds.waitForDeviceState(user.port, out.serial, "gone")).toBeUndefined();
    expect(await readTunnelStates({ FARM_HOME: home })).toEqual([]);
    expect(coordinator.tunnels.size).toBe(0);

    // By tunnel id: CloseTunnel at the coordinator; the local process notices, cleans up and exits.
    const again = JSON.parse((await farm(["adb", "connect", "--device", labSerial], farmEnv({ FARM_LEASE: "farml_test" }))).stdout) as typeof out;
    const closed = await farm(["adb", "disconnect", "--tunnel", again.tunnel]);
    expect(JSON.parse(closed.stdout)).toEqual({ ok: true, disconnected: [{ tunnel: again.tunnel, serial: again.serial, device: labSerial }] });
    expect(alive(again.pid)).toBe(false);
    expect(await ds.waitForDeviceState(user.port, again.serial, "gone")).toBeUndefined();
    expect(JSON.parse((await farm(["adb", "disconnect", "--all"])).stdout)).toEqual({ ok: true, disconnected: [] });
  });

  it("in the background: a tunnel the farm closes ends its process, which logs why and takes the phone out of adb", async () => {
    const connected = await farm(["adb", "connect", "--device", labSerial, "--coordinator", coordinator.url], farmEnv({ FARM_LEASE: "farml_test" }));
    const out = JSON.parse(connected.stdout) as { serial: string; tunnel: string; pid: number };
    const [state] = await readTunnelStates({ FARM_HOME: home });
    coordinator.close(out.tunnel, farmError(Errors.TUNNEL_CLOSED, "closed by the admin root"));
    expect(await exited(out.pid, 5_000)).toBe(true);
    expect(await ds.waitForDeviceState(user.port, out.serial, "gone")).toBeUndefined();
    expect(await readFile(state!.log!, "utf8")).toMatch(/remote adb tunnel .* closed, 127\.0\.0\.1:\d+ disconnected: closed by the admin root \[TUNNEL_CLOSED\]/);
    expect(await readTunnelStates({ FARM_HOME: home })).toEqual([]);
  });

  it("refuses before starting anything: no phone named, a port adb uses itself, a tunnel the coordinator does not know", async () => {
    expect(JSON.parse((await farm(["adb", "connect", "--coordinator", coordinator.url])).stdout)).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "device" });
    expect(JSON.parse((await farm(["adb", "connect", "--device", labSerial, "--port", "5555"])).stdout)).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "port" });
    expect(JSON.parse((await farm(["adb", "disconnect", "--device", "127.0.0.1:1"])).stdout)).toMatchObject({ ok: false, code: "TUNNEL_NOT_FOUND", field: "device" });
    expect(JSON.parse((await farm(["adb", "disconnect", "--tunnel", "nope", "--coordinator", coordinator.url])).stdout)).toMatchObject({ ok: false, code: "TUNNEL_NOT_FOUND" });
    expect(JSON.parse((await farm(["adb", "disconnect"])).stdout)).toMatchObject({ ok: false, code: "INVALID_ARGUMENT" });
    // The coordinator's own refusal comes back from the background process as this command's failure.
    const unknown = JSON.parse((await farm(["adb", "connect", "--device", "nosuch", "--coordinator", coordinator.url])).stdout) as Record<string, unknown>;
    expect(unknown).toMatchObject({ ok: false, code: "DEVICE_NOT_FOUND", field: "device" });
  });
});
