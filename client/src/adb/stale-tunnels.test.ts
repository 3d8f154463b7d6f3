import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { disconnectStaleTunnels } from "./stale-tunnels.js";
import { isStale, processStart, readTunnelStates, writeTunnelState, type TunnelState } from "./tunnel-state.js";
import { loadDevsim, type AdbServerHandle } from "./testing/devsim-lab.js";

// Which tunnels this machine served are stale (their process is gone), and
// what is done about them, against a real adb server; e2e
// (test/e2e/adb-tunnel-edges.test.ts) covers a serial left offline by a killed process.

let adb: AdbServerHandle;
let home: string;
let deadPid: number;
let serverSocket = "";

/** adb against this test's own adb server on a Unix socket (ADB_SERVER_SOCKET), as the docs advise on shared machines. */
function runAdb(args: string[]): Promise<string> {
  return new Promise((resolve) => execFile("adb", args, { timeout: 30_000, env: { ...process.env, ADB_SERVER_SOCKET: serverSocket } }, (_e, stdout, stderr) => resolve(`${stdout}${stderr}`)));
}

function state(over: Partial<TunnelState>): TunnelState {
  return {
    tunnelId: "t",
    serial: "127.0.0.1:1",
    port: 1,
    device: "R1",
    agent: "lab",
    physicalId: "p1",
    leaseId: "l1",
    coordinator: "http://127.0.0.1:1",
    adbServerPort: adb.port,
    pid: process.pid,
    pidStart: processStart(process.pid),
    foreground: false,
    startedAt: new Date().toISOString(),
    log: null,
    ...over,
  };
}

beforeAll(async () => {
  adb = await (await loadDevsim()).startAdbServer();
  home = await mkdtemp(join(tmpdir(), "farm-stale-"));
  serverSocket = `localfilesystem:${join(home, "adb.sock")}`;
  await runAdb(["start-server"]);
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  deadPid = child.pid as number;
  await once(child, "exit");
});

afterAll(async () => {
  if (serverSocket) await runAdb(["kill-server"]);
  await adb?.stop();
  if (home) await rm(home, { recursive: true, force: true });
});

describe("stale remote adb tunnels", () => {
  it("are those whose serving process is gone or whose pid now names another process", () => {
    expect(isStale(state({}))).toBe(false);
    expect(isStale(state({ pid: deadPid }))).toBe(true);
    expect(isStale(state({ pidStart: "not-this-process" }))).toBe(true);
    // No start time recorded (it could not be read): only a dead pid is known stale.
    expect(isStale(state({ pidStart: null }))).toBe(false);
    expect(isStale(state({ pid: deadPid, pidStart: null }))).toBe(true);
  });

  it("are forgotten; live ones are left alone; only a serial adb had is reported disconnected, and one a live tunnel uses again is not touched", async () => {
    const env = { FARM_HOME: home };
    // A listener that never speaks adb: `adb connect` leaves its serial offline in the server, as a killed tunnel process does.
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const offline = `127.0.0.1:${(silent.address() as AddressInfo).port}`;
    await runAdb(["connect", offline]);
    silent.close();
    expect(await runAdb(["devices"])).toContain(`${offline}\toffline`);
    await writeTunnelState(env, state({ tunnelId: "live", serial: "127.0.0.1:40001" }));
    // Connected through the socket's server (no port): reached there again, whatever this process's own ADB_SERVER_SOCKET.
    await writeTunnelState(env, state({ tunnelId: "dead", serial: offline, device: "R2", pid: deadPid, adbServerPort: null, adbServerSocket: serverSocket }));
    // adb had already dropped it: forgotten, not reported.
    await writeTunnelState(env, state({ tunnelId: "dead-absent", serial: "127.0.0.1:40002", pid: deadPid }));
    await writeTunnelState(env, state({ tunnelId: "dead-reused", serial: "127.0.0.1:40001", pid: deadPid }));
    const warnings: string[] = [];
    expect(await disconnectStaleTunnels(env, (l) => warnings.push(l))).toEqual([{ tunnel: "dead", serial: offline, device: "R2" }]);
    expect(await runAdb(["devices"])).not.toContain(offline);
    expect(warnings).toEqual([]);
    expect((await readTunnelStates(env)).map((s) => s.tunnelId)).toEqual(["live"]);
    expect(await disconnectStaleTunnels(env, (l) => warnings.push(l))).toEqual([]);
  });
});
