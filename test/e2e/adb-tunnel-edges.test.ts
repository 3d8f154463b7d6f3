/**
 * Remote adb at its edges: services that would strand the phone or reach
 * off it, tunnels whose serving process was killed (stale serials in the
 * user's adb server), and a coordinator that dies mid-tunnel. `farm
 * coordinator` and `farm agent` as separate processes, devsim phones behind
 * the lab's real adb server, the user's own real adb server.
 */
import { readdir } from "node:fs/promises";
import { connect } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, runAdb, SimDevice, startAdbServer, type AdbServer } from "../devsim/index.js";
import { connectForeground, type ForegroundTunnel } from "../support/adb-connect.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

let lab: SplitFarm;
let user: AdbServer;
const phones: SimDevice[] = [];
const serials: string[] = [];
const foreground: ForegroundTunnel[] = [];

/** What the user's adb server says of a serial: "device", "offline", or "gone". */
async function stateOf(local: string): Promise<string> {
  const r = await runAdb(user.port, ["devices"]);
  const line = r.stdout.split("\n").find((l) => l.startsWith(`${local}\t`));
  return line ? (line.split("\t")[1] ?? "").trim() : "gone";
}

async function lease(serial: string): Promise<NodeJS.ProcessEnv> {
  const r = await farm(["lease", "acquire", "--device", serial], lab.env);
  expect(r.code, r.stdout + r.stderr).toBe(0);
  const token = (r.json["lease"] as { token: string }).token;
  return { ...lab.env, FARM_LEASE: token, FARM_DEVICE: serial, ANDROID_ADB_SERVER_PORT: String(user.port) };
}

/** `farm adb connect` in the background, as users run it; resolves once the user's adb lists the phone. */
async function connectInBackground(env: NodeJS.ProcessEnv): Promise<{ local: string; pid: number; tunnel: string; json: Record<string, unknown> }> {
  const r = await farm(["adb", "connect"], env);
  expect(r.json, r.stderr).toMatchObject({ ok: true });
  const local = String(r.json["serial"]);
  await waitFor("the tunnel in the user's adb", async () => ((await stateOf(local)) === "device" ? true : undefined));
  return { local, pid: Number(r.json["pid"]), tunnel: String(r.json["tunnel"]), json: r.json };
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The agent's counter of refused services for one rule (0 when never counted). */
async function refusedCount(rule: string): Promise<number> {
  const text = await (await fetch(String(lab.agent.ready["metricsUrl"]))).text();
  const m = new RegExp(`^farm_agent_adb_services_refused_total\\{rule="${rule}"\\} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

/**
 * Opens a service on `serial` through the user's adb server with adb's host
 * protocol (host:transport:SERIAL, then the service): resolves with the
 * server's two answers ("OKAYOKAY", or "OKAYFAIL" and its message).
 */
function openThroughUserAdb(serial: string, service: string): Promise<string> {
  const frame = (s: string) => `${s.length.toString(16).padStart(4, "0")}${s}`;
  return new Promise((resolve, reject) => {
    let bytes = "";
    const c = connect({ host: "127.0.0.1", port: user.port }, () => c.write(frame(`host:transport:${serial}`)));
    const settle = (answer: string) => {
      c.destroy();
      resolve(answer);
    };
    c.on("data", (d) => {
      const first = bytes.length < 4;
      bytes += d.toString("latin1");
      // The service goes only after the transport is chosen: adb's server drops what came with the first request.
      if (first && bytes.length >= 4 && bytes.startsWith("OKAY")) c.write(frame(service));
      const second = bytes.slice(4, 8);
      if (bytes.slice(0, 4) !== "OKAY") return bytes.length >= 8 ? settle(bytes) : undefined;
      if (second === "OKAY") return settle(bytes.slice(0, 8));
      if (second === "FAIL" && bytes.length >= 12 && bytes.length >= 12 + Number.parseInt(bytes.slice(8, 12), 16)) return settle(bytes);
      return undefined;
    });
    c.once("close", () => resolve(bytes));
    c.once("error", reject);
  });
}

async function tunnelStateFiles(): Promise<string[]> {
  return (await readdir(join(String(lab.env["FARM_HOME"]), "adb-tunnels")).catch(() => [] as string[])).filter((n) => n.endsWith(".json"));
}

beforeAll(async () => {
  lab = await startSplitFarm("adb-tunnel-edges", { agentArgs: ["--metrics-listen", "127.0.0.1:0"] });
  user = await startAdbServer();
  for (const serialno of ["REDGE001", "REDGE002"]) {
    const phone = new SimDevice({ serialno });
    phones.push(phone);
    const serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
    serials.push(serial);
    await waitFor(`${serial} online`, async () => (((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string }[]).some((d) => d.serial === serial && d.state === "device") ? true : undefined);
  }
}, 120_000);

afterAll(async () => {
  for (const t of foreground) if (t.proc.exitCode === null) t.proc.kill("SIGKILL");
  await farm(["adb", "disconnect", "--all"], { ...lab?.env, ANDROID_ADB_SERVER_PORT: String(user?.port) }).catch(() => undefined);
  await user?.stop();
  for (const p of phones) await p.close();
  await lab?.stop();
});

describe("remote adb at its edges", () => {
  it("refuses reboots into bootloader or recovery and forwards off the phone: adb gets a failure, the CLI says why, the agent logs and counts it, the phone stays", async () => {
    const env = await lease(serials[0] as string);
    const tunnel = await connectForeground(env);
    foreground.push(tunnel);
    const local = String(tunnel.answer["serial"]);
    await waitFor("the tunnel in the user's adb", async () => ((await stateOf(local)) === "device" ? true : undefined));

    const bootloader = await runAdb(user.port, ["-s", local, "reboot", "bootloader"]);
    expect(bootloader.code).not.toBe(0);
    await waitFor("the CLI saying why", () => (/adb reboot bootloader is not tunnelled: it leaves the phone in bootloader mode/.test(tunnel.stderr()) ? true : undefined));
    const recovery = await runAdb(user.port, ["-s", local, "reboot", "recovery"]);
    expect(recovery.code).not.toBe(0);
    // Not rebooted: the phone answers at once, through the tunnel and in the farm.
    expect((await runAdb(user.port, ["-s", local, "shell", "echo", "still here"])).stdout.trim()).toBe("still here");

    // A socket off the phone (the emulator's alias of the lab host), asked of the user's adb server as adb
    // libraries do (the adb 29 CLI's own `adb forward` takes only tcp:PORT): the server answers FAIL.
    expect(await openThroughUserAdb(local, "tcp:10.0.2.2:5037")).toMatch(/^OKAYFAIL[0-9a-f]{4}closed$/);
    await waitFor("the CLI saying why", () => (/tunnelled only to the phone's own loopback/.test(tunnel.stderr()) ? true : undefined));
    // The phone's own loopback is still forwarded to (nothing listens there: the phone's refusal, not the farm's).
    expect(await openThroughUserAdb(local, "tcp:localhost:1")).toMatch(/^OKAYFAIL/);

    expect(await refusedCount("reboot-mode")).toBe(2);
    expect(await refusedCount("tcp-host")).toBe(1);
    expect(lab.agent.stderr()).toMatch(/adb service refused.*"rule":"reboot-mode"/);
    expect(lab.agent.stderr()).toMatch(/adb service refused.*"rule":"tcp-host"/);

    tunnel.proc.kill("SIGTERM");
    expect(await tunnel.exited).toBe(0);
    expect((await farm(["lease", "release"], env)).code).toBe(0);
  });

  it("allows a plain adb reboot: the phone comes back on the same serial, the tunnel carries on, and the farm records the reboot", async () => {
    const env = await lease(serials[0] as string);
    const devices = async () => ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string; properties: { bootId: string } }[];
    const bootBefore = (await devices()).find((d) => d.serial === serials[0])?.properties.bootId;
    const tunnel = await connectForeground(env);
    foreground.push(tunnel);
    const local = String(tunnel.answer["serial"]);
    await waitFor("the tunnel in the user's adb", async () => ((await stateOf(local)) === "device" ? true : undefined));

    expect((await runAdb(user.port, ["-s", local, "reboot"])).code).toBe(0);
    await waitFor("the phone back with a new boot id", async () => {
      const d = (await devices()).find((x) => x.serial === serials[0]);
      return d && d.state === "device" && d.properties.bootId && d.properties.bootId !== bootBefore ? true : undefined;
    }, { timeoutMs: 30_000 });
    await waitFor("the reboot in the device's history", async () => {
      const s = await farm(["device", "ownership", "status", "--device", serials[0] as string], lab.env);
      return ((s.json["ownership"] as { history: { kind: string }[] } | undefined)?.history ?? []).some((h) => h.kind === "reboot") ? true : undefined;
    });
    // The same tunnel reaches the rebooted phone.
    await waitFor("the tunnel usable again", async () => ((await runAdb(user.port, ["-s", local, "shell", "echo", "back"])).stdout.trim() === "back" ? true : undefined), { timeoutMs: 30_000 });
    expect(tunnel.proc.exitCode).toBeNull();

    tunnel.proc.kill("SIGTERM");
    expect(await tunnel.exited).toBe(0);
    expect((await farm(["lease", "release"], env)).code).toBe(0);
  });

  it("farm adb list disconnects the serial a killed tunnel process left offline in the user's adb, and says so", async () => {
    const env = await lease(serials[0] as string);
    const t = await connectInBackground(env);
    // The serving process dies without cleaning up (OOM killer, kill -9).
    process.kill(t.pid, "SIGKILL");
    await waitFor("the serving process gone", () => (alive(t.pid) ? undefined : true), { intervalMs: 50 });
    await waitFor("the stale serial offline in the user's adb", async () => ((await stateOf(t.local)) === "offline" ? true : undefined));

    const listed = await farm(["adb", "list"], env);
    expect(listed.json, listed.stderr).toMatchObject({ ok: true, staleDisconnected: [{ tunnel: t.tunnel, serial: t.local, device: serials[0] }] });
    expect(await stateOf(t.local)).toBe("gone");
    expect(await tunnelStateFiles()).toEqual([]);
    // Nothing stale is left: the next listing disconnects nothing.
    expect((await farm(["adb", "list"], env)).json).toMatchObject({ ok: true, staleDisconnected: [] });
    expect((await farm(["lease", "release"], env)).code).toBe(0);
  });

  it("farm adb connect disconnects stale serials before it connects a new one, and says so", async () => {
    const envA = await lease(serials[0] as string);
    const a = await connectInBackground(envA);
    process.kill(a.pid, "SIGKILL");
    await waitFor("the serving process gone", () => (alive(a.pid) ? undefined : true), { intervalMs: 50 });
    await waitFor("the stale serial offline in the user's adb", async () => ((await stateOf(a.local)) === "offline" ? true : undefined));

    const envB = await lease(serials[1] as string);
    const b = await connectInBackground(envB);
    expect(b.json).toMatchObject({ staleDisconnected: [{ tunnel: a.tunnel, serial: a.local, device: serials[0] }] });
    expect(await stateOf(a.local)).toBe("gone");
    expect(await stateOf(b.local)).toBe("device");
    expect((await farm(["adb", "disconnect", "--all"], envB)).json).toMatchObject({ ok: true });
    await farm(["lease", "release"], envA);
    await farm(["lease", "release"], envB);
  });

  // Last: the lab's coordinator does not come back.
  it("reports COORDINATOR_UNAVAILABLE (field coordinator) when the coordinator dies mid-tunnel, and the phone leaves the user's adb", async () => {
    const env = await lease(serials[1] as string);
    const tunnel = await connectForeground(env);
    foreground.push(tunnel);
    const local = String(tunnel.answer["serial"]);
    await waitFor("the tunnel in the user's adb", async () => ((await stateOf(local)) === "device" ? true : undefined));
    lab.coordinator.kill("SIGKILL");
    // COORDINATOR_UNAVAILABLE exits 69 (docs/cli.md, Exit codes), as any farm failure that is not the test's.
    expect(await tunnel.exited).toBe(69);
    const last = JSON.parse(tunnel.lines.at(-1) ?? "{}") as Record<string, unknown>;
    expect(last, JSON.stringify(last)).toMatchObject({ ok: false, code: "COORDINATOR_UNAVAILABLE", field: "coordinator" });
    expect(String(last["message"])).toMatch(new RegExp(`${local} disconnected`));
    await waitFor("the tunnel gone from the user's adb", async () => ((await stateOf(local)) === "gone" ? true : undefined), { timeoutMs: 5_000 });
  });
});
