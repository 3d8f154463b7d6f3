/**
 * Remote adb end to end: `farm standalone` (coordinator and agent) with a
 * lab adb server and a simulated phone; the user's own adb server on a
 * private port; `farm adb connect` in between. Real adb clients on both ends.
 */
import type { ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { connect, createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdbTunnelService } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { buildSimApk, runAdb, startAdbServer, type AdbServer, type SimDevice } from "../devsim/index.js";
import { connectForeground as startForeground, type ForegroundTunnel } from "../support/adb-connect.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;
let user: AdbServer;
let serial = "";
let phone: SimDevice;
let admin = "";
const children: ChildProcess[] = [];

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

async function connectForeground(env: NodeJS.ProcessEnv): Promise<ForegroundTunnel> {
  const t = await startForeground(env);
  children.push(t.proc);
  return t;
}

/** What the user's adb server says of a serial: "device", "offline", or "gone". */
async function stateOf(local: string): Promise<string> {
  const r = await runAdb(user.port, ["devices"]);
  const line = r.stdout.split("\n").find((l) => l.startsWith(`${local}\t`));
  return line ? (line.split("\t")[1] ?? "").trim() : "gone";
}

async function lease(env: NodeJS.ProcessEnv): Promise<{ token: string; leaseId: string }> {
  const r = await farm(["lease", "acquire", "--device", serial], env);
  expect(r.code, r.stdout + r.stderr).toBe(0);
  return r.json["lease"] as { token: string; leaseId: string };
}

beforeAll(async () => {
  lab = await startLab("adb-tunnel");
  ({ device: phone, serial } = await lab.addDevice({ serialno: "RTUNNEL01" }));
  admin = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
  user = await startAdbServer();
}, 120_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  await user?.stop();
  await lab?.stop();
});

describe("farm adb connect", () => {
  it("is refused without a lease on the phone, before anything opens", async () => {
    const r = await farm(["adb", "connect", "--device", serial], { ...lab.env, ANDROID_ADB_SERVER_PORT: String(user.port) });
    expect(r.json).toMatchObject({ ok: false, code: "LEASE_REQUIRED" });
    expect(await runAdb(user.port, ["devices"]).then((x) => x.stdout.trim().split("\n").length)).toBe(1);
  });

  it("puts the leased phone in the user's own adb: shell exit codes, 20 MiB push and pull, install, logcat; the lease's release takes it away", async () => {
    const held = await lease(lab.env);
    const env = { ...lab.env, FARM_LEASE: held.token, FARM_DEVICE: serial, ANDROID_ADB_SERVER_PORT: String(user.port) };
    const tunnel = await connectForeground(env);
    expect(tunnel.answer).toMatchObject({ ok: true, device: serial });
    const local = String(tunnel.answer["serial"]);
    expect(local).toMatch(/^127\.0\.0\.1:\d+$/);
    await waitFor("the tunnel listed as a device by the user's adb", async () => ((await stateOf(local)) === "device" ? true : undefined));

    const model = await runAdb(user.port, ["-s", local, "shell", "getprop", "ro.product.model"]);
    expect(model.stdout.trim().length).toBeGreaterThan(0);
    const exit = await runAdb(user.port, ["-s", local, "shell", "echo out; echo err >&2; exit 7"]);
    expect(exit).toMatchObject({ code: 7 });
    expect(exit.stdout.trim()).toBe("out");
    expect(exit.stderr.trim()).toBe("err");

    const big = randomBytes(20 * 1024 * 1024);
    const src = join(lab.dir.path, "big.bin");
    await writeFile(src, big);
    expect((await runAdb(user.port, ["-s", local, "push", src, "/sdcard/big.bin"], { timeoutMs: 120_000 })).code).toBe(0);
    const back = join(lab.dir.path, "big-back.bin");
    expect((await runAdb(user.port, ["-s", local, "pull", "/sdcard/big.bin", back], { timeoutMs: 120_000 })).code).toBe(0);
    expect(sha256(await readFile(back))).toBe(sha256(big));

    const apk = join(lab.dir.path, "tunnel.apk");
    await writeFile(apk, buildSimApk({ name: "com.example.tunnelled", versionCode: 1, versionName: "1.0" }));
    const installed = await runAdb(user.port, ["-s", local, "install", apk], { timeoutMs: 60_000 });
    expect(installed.stdout, installed.stderr).toMatch(/Success/);
    expect((await runAdb(user.port, ["-s", local, "shell", "pm", "path", "com.example.tunnelled"])).stdout).toContain("package:");
    expect((await runAdb(user.port, ["-s", local, "logcat", "-d"])).code).toBe(0);

    // adb forward: a port on the user's machine reaches a socket on the phone (an echo server on the phone's tcp:7777).
    const echo = createServer((c) => c.pipe(c));
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    phone.state.sockets.registerPort("tcp:7777", (echo.address() as AddressInfo).port);
    try {
      const fwd = await runAdb(user.port, ["-s", local, "forward", "tcp:0", "tcp:7777"]);
      expect(fwd.code, fwd.stderr).toBe(0);
      const port = Number(fwd.stdout.trim());
      const reply = await new Promise<string>((resolve, reject) => {
        const c = connect({ host: "127.0.0.1", port }, () => c.write("ping through the tunnel"));
        c.once("data", (d) => {
          resolve(d.toString());
          c.destroy();
        });
        c.once("error", reject);
      });
      expect(reply).toBe("ping through the tunnel");
      await runAdb(user.port, ["-s", local, "forward", "--remove-all"]);
    } finally {
      echo.close();
    }

    // While the tunnel is open, its owner's own farm changes run beside it (not after the deadline), and their receipts say a raw adb window was open.
    const beside = await farm(["shell", "--timeout", "120000", "--", "echo", "beside"], env);
    expect(beside.json, beside.stderr).toMatchObject({ ok: true, stdout: "beside\n" });
    const receipt = await farm(["device", "ownership", "receipt", "--action-id", String(beside.json["actionId"])], env);
    const action = receipt.json["action"] as { kind: string; state: string; receiptJson: string };
    expect(action).toMatchObject({ kind: "shell", state: "settled" });
    expect(JSON.parse(action.receiptJson)).toMatchObject({ concurrentRawAdb: { tunnelId: String(tunnel.answer["tunnel"]), actionId: expect.any(String) as unknown } });
    // ... while the tunnel's own window stays one raw-adb action, still running.
    const status = await farm(["device", "ownership", "status"], env);
    const tunnelAction = (JSON.parse(action.receiptJson) as { concurrentRawAdb: { actionId: string } }).concurrentRawAdb.actionId;
    expect((status.json["ownership"] as { recent: { actionId: string; kind: string; state: string }[] }).recent).toContainEqual(expect.objectContaining({ actionId: tunnelAction, kind: "raw-adb", state: "pending" }));
    // An input (what a dashboard click sends) runs beside it too.
    const tap = await farm(["input", "tap", "10", "20", "--timeout", "120000"], env);
    expect(tap.json, tap.stderr).toMatchObject({ ok: true });
    // The tunnel still works after them.
    expect((await runAdb(user.port, ["-s", local, "shell", "echo", "still"])).stdout.trim()).toBe("still");

    // Anyone else presenting the lease, another admin included, is refused at once (not after the 120 s timeout), told how to free the phone.
    for (const [name, role] of [["ci-bot", "operator"], ["other-admin", "admin"]] as const) {
      const token = String((await farm(["token", "create", "--kind", "user", "--name", name, "--role", role], { ...lab.env, FARM_TOKEN: admin })).json["token"]);
      const t0 = Date.now();
      const busy = await farm(["shell", "--timeout", "120000", "--", "echo", "x"], { ...env, FARM_TOKEN: token });
      expect(busy.json, name).toMatchObject({ ok: false, code: "DEVICE_BUSY", dispatched: false });
      expect(Date.now() - t0).toBeLessThan(60_000);
      expect(String(busy.json["message"])).toMatch(/remote adb tunnel/);
      expect(String(busy.json["message"])).toContain(`farm adb disconnect --device ${serial}`);
    }

    // Another user cannot use the tunnel, even knowing its id.
    const other = await farm(["token", "create", "--kind", "user", "--name", "mallory"], { ...lab.env, FARM_TOKEN: admin });
    const auth: Interceptor = (next) => (req) => {
      req.header.set("authorization", `Bearer ${String(other.json["token"])}`);
      return next(req);
    };
    const client = createClient(AdbTunnelService, createGrpcTransport({ baseUrl: String(lab.standalone.ready["url"]), interceptors: [auth] }));
    async function* open() {
      yield { kind: { case: "start" as const, value: { tunnelId: String(tunnel.answer["tunnel"]), service: "shell:id" } } };
    }
    await expect((async () => {
      for await (const _ of client.openAdbStream(open())) break;
    })()).rejects.toThrow(/TUNNEL_NOT_FOUND|no open tunnel/);

    expect((await farm(["lease", "release"], env)).code).toBe(0);
    // Closed by the release itself, not found later: only the coordinator's leaseEnded handler gives this
    // reason (a keepalive, ping or idle close would say otherwise), and it runs when the release commits.
    // Said by the reason, not by a time bound: the tunnel's exit (adb disconnect, the state file) took
    // 2.4 s at load 15.
    expect(await tunnel.exited).toBe(77);
    expect(tunnel.lines.join("\n")).toMatch(/LEASE_RELEASED/);
    expect(tunnel.lines.join("\n")).toContain("was released: the remote adb tunnel is closed");
    await waitFor("the tunnel gone from the user's adb", async () => ((await stateOf(local)) === "gone" ? true : undefined), { timeoutMs: 5_000 });
    // The tunnel's action settled and let go of the phone: farm changes work again under a new lease.
    const again = await lease(lab.env);
    expect((await farm(["shell", "--", "echo", "free"], { ...env, FARM_LEASE: again.token })).json).toMatchObject({ ok: true });
    expect((await farm(["lease", "release"], { ...env, FARM_LEASE: again.token })).code).toBe(0);
    // A hang guard for some thirty CLI runs, 40 MiB through the tunnel and an install: 51 s at load 15.
  }, 180_000);

  it("closes when the lease expires, and the activity log shows the tunnel", async () => {
    const r = await farm(["lease", "acquire", "--device", serial], lab.env);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const token = (r.json["lease"] as { token: string }).token;
    const env = { ...lab.env, FARM_LEASE: token, FARM_DEVICE: serial, ANDROID_ADB_SERVER_PORT: String(user.port) };
    const tunnel = await connectForeground(env);
    expect(tunnel.answer).toMatchObject({ ok: true });
    // Shortened only once the tunnel is open: a short TTL from the start could run out before a loaded machine opened it.
    const renewed = await farm(["lease", "renew", "--ttl", "1s"], { ...lab.env, FARM_LEASE: token });
    expect(renewed.code, renewed.stdout + renewed.stderr).toBe(0);
    expect(await tunnel.exited).toBe(77);
    expect(tunnel.lines.join("\n")).toMatch(/LEASE_EXPIRED/);
    const activity = await farm(["activity", "--device", serial], lab.env);
    expect(JSON.stringify(activity.json)).toContain("adbTunnel");
  });
});
