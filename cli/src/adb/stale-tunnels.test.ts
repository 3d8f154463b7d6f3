import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
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
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  deadPid = child.pid as number;
  await once(child, "exit");
});

afterAll(async () => {
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

  it("are disconnected and forgotten; live ones are left alone, and a serial a live tunnel uses again is only forgotten", async () => {
    const env = { FARM_HOME: home };
    await writeTunnelState(env, state({ tunnelId: "live", serial: "127.0.0.1:40001" }));
    await writeTunnelState(env, state({ tunnelId: "dead", serial: "127.0.0.1:40002", device: "R2", pid: deadPid }));
    await writeTunnelState(env, state({ tunnelId: "dead-reused", serial: "127.0.0.1:40001", pid: deadPid }));
    const warnings: string[] = [];
    expect(await disconnectStaleTunnels(env, (l) => warnings.push(l))).toEqual([{ tunnel: "dead", serial: "127.0.0.1:40002", device: "R2" }]);
    expect(warnings).toEqual([]);
    expect((await readTunnelStates(env)).map((s) => s.tunnelId)).toEqual(["live"]);
    expect(await disconnectStaleTunnels(env, (l) => warnings.push(l))).toEqual([]);
  });
});
