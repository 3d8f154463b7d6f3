/**
 * Leases and routing end to end: `farm standalone` as its own process, real
 * adb server, simulated phones, the CLI and plain Connect clients.
 */
import { spawn } from "node:child_process";
import { spawn as ptySpawn } from "node-pty";
import { stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import sharp from "sharp";
import { readFile } from "node:fs/promises";

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";

import { buildSimApk, type SimDevice } from "../devsim/index.js";
import { farm, farmProcess, farmBin, waitFor } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;
let phones: { device: SimDevice; serial: string }[] = [];
let admin: string;

function adminTransport() {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${admin}`);
    return next(req);
  };
  return createGrpcTransport({ baseUrl: String(lab.standalone.ready["url"]), interceptors: [auth] });
}

function leaseClient() {
  return createClient(LeaseService, adminTransport());
}

/** Reads a List call page by page; returns each page. */
async function pages<P extends { nextPageToken: string }>(read: (pageToken: string) => Promise<P>): Promise<P[]> {
  const out: P[] = [];
  let token = "";
  do {
    if (out.length > 50) throw new Error("paging does not end");
    out.push(await read(token));
    token = out[out.length - 1]?.nextPageToken ?? "";
  } while (token);
  return out;
}

/** The code a call fails with. */
const codeOf = (p: Promise<unknown>) => p.then(() => undefined, (err: unknown) => ConnectError.from(err).code);

async function acquireJson(args: string[], env = lab.env) {
  const r = await farm(["lease", "acquire", ...args], env);
  return { ...r, lease: r.json["lease"] as { token: string; physicalId: string; serial: string; leaseId: string } | undefined };
}

beforeAll(async () => {
  lab = await startLab("leases");
  admin = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
  phones = [];
  for (let i = 0; i < 10; i++) phones.push(await lab.addDevice({ serialno: `LEASE${String(i).padStart(4, "0")}` }));
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("leases", () => {
  it("never gives one phone two leases under 200 concurrent acquires for 10 phones", async () => {
    const client = leaseClient();
    const holding = new Map<string, number>();
    let maxConcurrent = 0;
    let granted = 0;
    await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const res = await client.acquireLease({ waitMs: 120_000, ttlMs: 60_000, ticket: `t-${i}` }, { timeoutMs: 150_000 });
        const id = res.lease?.physicalId as string;
        const now = (holding.get(id) ?? 0) + 1;
        holding.set(id, now);
        maxConcurrent = Math.max(maxConcurrent, now);
        granted++;
        await new Promise((r) => setTimeout(r, 5));
        holding.set(id, (holding.get(id) ?? 1) - 1);
        await client.releaseLease({ token: res.token });
      }),
    );
    expect(granted).toBe(200);
    expect(maxConcurrent).toBe(1);
    expect((await client.listLeases({})).leases).toHaveLength(0);
  });

  it("grants waiters for the same phone in arrival order", async () => {
    const client = leaseClient();
    const serial = phones[0]?.serial as string;
    const first = await client.acquireLease({ selector: { serial }, waitMs: 0, ttlMs: 60_000 });
    const order: number[] = [];
    const waiting: Promise<void>[] = [];
    for (let i = 0; i < 8; i++) {
      waiting.push(
        client.acquireLease({ selector: { serial }, waitMs: 60_000, ttlMs: 60_000, ticket: `fifo-${i}` }, { timeoutMs: 90_000 }).then(async (res) => {
          order.push(i);
          await client.releaseLease({ token: res.token });
        }),
      );
      // Wait until this request is queued before sending the next one.
      await waitFor(`waiter ${i} queued`, async () => ((await client.listLeases({})).queue.length === i + 1 ? true : undefined), { intervalMs: 10 });
    }
    const queue = (await client.listLeases({})).queue.map((w) => w.ticket);
    expect(queue).toEqual(Array.from({ length: 8 }, (_, i) => `fifo-${i}`));
    await client.releaseLease({ token: first.token });
    await Promise.all(waiting);
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  it("pages leases, devices and labels: each row once, the queue on the first page, the CLI lists them all", async () => {
    const client = leaseClient();
    const registry = createClient(RegistryService, adminTransport());
    const held = [];
    for (const p of phones.slice(0, 7)) held.push(await client.acquireLease({ selector: { serial: p.serial }, waitMs: 10_000, ttlMs: 60_000 }));
    const stop = new AbortController();
    const waiting = client.acquireLease({ selector: { serial: phones[0]?.serial as string }, waitMs: 60_000, ttlMs: 60_000, ticket: "paged-waiter" }, { signal: stop.signal }).catch(() => undefined);
    try {
      await waitFor("the waiter queued", async () => ((await client.listLeases({})).queue.length === 1 ? true : undefined), { intervalMs: 10 });
      const leasePages = await pages((pageToken) => client.listLeases({ pageSize: 3, pageToken }));
      expect(leasePages.map((p) => [p.leases.length, p.queue.length])).toEqual([
        [3, 1],
        [3, 0],
        [1, 0],
      ]);
      const ids = leasePages.flatMap((p) => p.leases.map((l) => l.leaseId));
      expect(new Set(ids)).toEqual(new Set(held.map((h) => h.lease?.leaseId)));
      expect(await codeOf(client.listLeases({ pageSize: -1 }))).toBe(Code.InvalidArgument);
      expect(await codeOf(client.listLeases({ pageToken: "not-a-token" }))).toBe(Code.InvalidArgument);
      const listed = await farm(["lease", "list"], lab.env);
      expect([(listed.json["leases"] as unknown[]).length, (listed.json["queue"] as unknown[]).length]).toEqual([7, 1]);

      const devicePages = await pages((pageToken) => registry.listDevices({ pageSize: 4, pageToken }));
      expect(devicePages.map((p) => p.devices.length)).toEqual([4, 4, 2]);
      const serials = devicePages.flatMap((p) => p.devices.map((d) => d.serial));
      expect(new Set(serials)).toEqual(new Set(phones.map((p) => p.serial)));
      expect(((await farm(["devices"], lab.env)).json["devices"] as { serial: string }[]).map((d) => d.serial).sort()).toEqual([...serials].sort());
      // A token is for the filters it was issued with.
      expect(await codeOf(registry.listDevices({ state: "offline", pageSize: 4, pageToken: devicePages[0]?.nextPageToken ?? "" }))).toBe(Code.InvalidArgument);
      const agentPages = await pages((pageToken) => registry.listAgents({ pageSize: 1, pageToken }));
      expect(agentPages.flatMap((p) => p.agents)).toHaveLength(1);
    } finally {
      stop.abort();
      await waiting;
      for (const h of held) await client.releaseLease({ token: h.token });
    }

    for (const p of phones.slice(0, 3)) expect((await farm(["device", "label", "set", p.serial, "paged=yes"], lab.env)).code).toBe(0);
    const labelPages = await pages((pageToken) => client.listDeviceLabels({ pageSize: 1, pageToken }));
    expect(labelPages.map((p) => p.devices.length)).toEqual([1, 1, 1]);
    const labelled = (await farm(["device", "label", "list"], lab.env)).json["devices"] as { physicalId: string; labels: Record<string, string> }[];
    expect(labelled.filter((d) => d.labels["paged"] === "yes")).toHaveLength(3);
    for (const p of phones.slice(0, 3)) expect((await farm(["device", "label", "rm", p.serial, "paged"], lab.env)).code).toBe(0);
  });

  it("fails at once when nothing matches and no wait is allowed, and refuses to renew an expired lease", async () => {
    const none = await acquireJson(["--model", "No Such Phone"]);
    expect(none.json).toMatchObject({ ok: false, code: "NO_DEVICE_MATCHES", field: "model" });
    const short = await acquireJson(["--device", phones[1]?.serial as string, "--ttl", "1s"]);
    expect(short.code).toBe(0);
    await waitFor("the lease to expire", async () => ((await farm(["lease", "list"], lab.env)).json["leases"] as unknown[]).length === 0 ? true : undefined);
    const renew = await farm(["lease", "renew", "--lease", short.lease?.token as string], lab.env);
    expect(renew.json).toMatchObject({ ok: false, code: "LEASE_EXPIRED" });
  });

  it("frees the phone of a holder killed with SIGKILL once its TTL passes, for the next waiter", async () => {
    const serial = phones[2]?.serial as string;
    const holder = await startLeaseRun(["--device", serial, "--ttl", "2s"], ["sleep", "60"]);
    await waitFor("the holder's lease", async () => ((await farm(["lease", "list"], lab.env)).json["leases"] as { serial: string }[]).some((l) => l.serial === serial) ? true : undefined);
    holder.kill("SIGKILL");
    const t0 = Date.now();
    const next = await acquireJson(["--device", serial, "--wait", "30s"]);
    expect(next.code).toBe(0);
    expect(next.lease?.serial).toBe(serial);
    expect(Date.now() - t0).toBeLessThan(25_000);
    await farm(["lease", "release", "--lease", next.lease?.token as string], lab.env);
  });

  it("never grants a waiter whose client went away", async () => {
    const serial = phones[3]?.serial as string;
    const held = await acquireJson(["--device", serial, "--ttl", "1m"]);
    const waiter = spawn(process.execPath, [farmBin, "lease", "acquire", "--device", serial, "--wait", "60s", "--output", "json"], { env: { ...process.env, ...lab.env }, stdio: "ignore" });
    await waitFor("the waiter queued", async () => ((await farm(["lease", "list"], lab.env)).json["queue"] as unknown[]).length === 1 ? true : undefined);
    waiter.kill("SIGKILL");
    await waitFor("the waiter removed", async () => ((await farm(["lease", "list"], lab.env)).json["queue"] as unknown[]).length === 0 ? true : undefined);
    await farm(["lease", "release", "--lease", held.lease?.token as string], lab.env);
    const leases = (await farm(["lease", "list"], lab.env)).json["leases"] as { serial: string }[];
    expect(leases.some((l) => l.serial === serial)).toBe(false);
  });

  it("matches labels, and keeps leases, the queue and labels across a coordinator restart", async () => {
    const serial = phones[4]?.serial as string;
    expect((await farm(["device", "label", "set", serial, "rack=b2", "purpose=ci"], lab.env)).code).toBe(0);
    const held = await acquireJson(["--label", "rack=b2", "--ttl", "2m"]);
    expect(held.lease?.serial).toBe(serial);
    const waiter = spawn(process.execPath, [farmBin, "lease", "acquire", "--label", "rack=b2", "--wait", "90s", "--output", "json"], { env: { ...process.env, ...lab.env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    waiter.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    const waiterExit = new Promise<number | null>((resolve) => waiter.once("exit", resolve));
    await waitFor("the waiter queued", async () => ((await farm(["lease", "list"], lab.env)).json["queue"] as unknown[]).length === 1 ? true : undefined);

    lab.standalone.kill("SIGKILL");
    await lab.standalone.exited;
    await lab.restart();
    const after = await waitFor("state after the restart", async () => {
      const r = await farm(["lease", "list"], lab.env);
      const q = r.json["queue"] as unknown[] | undefined;
      return r.code === 0 && q && q.length === 1 ? r : undefined;
    });
    expect((after.json["leases"] as { leaseId: string }[]).map((l) => l.leaseId)).toContain(held.lease?.leaseId);
    await waitFor("devices back", async () => ((await farm(["devices", "--state", "device"], lab.env)).json["devices"] as unknown[]).length >= 10 ? true : undefined);
    expect((await farm(["lease", "release", "--lease", held.lease?.token as string], lab.env)).code).toBe(0);
    expect(await waiterExit).toBe(0);
    const granted = JSON.parse(out.trim().split("\n").pop() ?? "{}") as { lease: { serial: string; token: string } };
    expect(granted.lease.serial).toBe(serial);
    await farm(["lease", "release", "--lease", granted.lease.token], lab.env);
  });

  it("runs a command with FARM_LEASE and FARM_DEVICE, passes its exit code through and releases", async () => {
    const serial = phones[5]?.serial as string;
    const script = `node ${farmBin} shell -- echo inside-"$FARM_DEVICE" && exit 7`;
    const r = await farmProcess(["lease", "run", "--device", serial, "--", "sh", "-c", script], lab.env);
    expect(r.code).toBe(7);
    expect(r.stdout).toContain(`inside-${serial}`);
    const leases = (await farm(["lease", "list"], lab.env)).json["leases"] as { serial: string }[];
    expect(leases.some((l) => l.serial === serial)).toBe(false);
  });
});

describe("routing", () => {
  it("refuses a mutation without a lease, or with someone else's, and lets reads through", async () => {
    const serial = phones[6]?.serial as string;
    const none = await farm(["shell", "--device", serial, "--", "echo", "x"], lab.env);
    expect(none.json).toMatchObject({ ok: false, code: "LEASE_REQUIRED", dispatched: false, ambiguous: false });
    const other = await farm(["token", "create", "--kind", "user", "--name", "ci-bot"], lab.env);
    const botEnv = { ...lab.env, FARM_TOKEN: String(other.json["token"]) };
    const bot = await acquireJson(["--device", serial], botEnv);
    expect(bot.code).toBe(0);
    const denied = await farm(["shell", "--device", serial, "--", "echo", "x"], lab.env);
    expect(denied.json).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER", dispatched: false });
    expect(String(denied.json["message"])).toContain("ci-bot");
    const read = await farm(["device", "ownership", "status", "--device", serial], lab.env);
    expect(read.code).toBe(0);
    const ok = await farm(["shell", "--device", serial, "--", "echo", "mine"], { ...botEnv, FARM_LEASE: bot.lease?.token as string });
    expect(ok.json).toMatchObject({ ok: true, stdout: "mine\n" });
    await farm(["lease", "release", "--lease", bot.lease?.token as string], botEnv);
  });

  it("repeats a request id's first result and refuses different content", async () => {
    const serial = phones[7]?.serial as string;
    const held = await acquireJson(["--device", serial]);
    const env = { ...lab.env, FARM_LEASE: held.lease?.token as string, FARM_DEVICE: serial };
    const a = await farm(["shell", "--request-id", "req-1", "--", "echo", "once"], env);
    const b = await farm(["shell", "--request-id", "req-1", "--", "echo", "once"], env);
    expect(a.json).toMatchObject({ ok: true, stdout: "once\n" });
    expect(b.json["actionId"]).toBe(a.json["actionId"]);
    const c = await farm(["shell", "--request-id", "req-1", "--", "echo", "twice"], env);
    expect(c.json).toMatchObject({ ok: false, code: "IDEMPOTENCY_CONFLICT", field: "request-id", dispatched: false, ambiguous: false });
    const activity = await farm(["activity", "--device", serial], lab.env);
    const entries = activity.json["entries"] as { command: string; outcome: string; caller: string; leaseId: string }[];
    expect(entries.filter((e) => e.command === "runShell" && e.outcome === "ok")).toHaveLength(1);
    expect(entries[0]).toMatchObject({ caller: "admin", leaseId: held.lease?.leaseId });
    await farm(["lease", "release", "--lease", held.lease?.token as string], lab.env);
  });

  it("reads properties and the log without a lease; input and reboot need one and are journaled", async () => {
    const phone = phones[8] as { device: SimDevice; serial: string };
    const env = { ...lab.env, FARM_DEVICE: phone.serial };
    const props = await farm(["device", "props"], env);
    expect((props.json["properties"] as Record<string, string>)["ro.serialno"]).toBe(phone.device.serialno);
    const log = await farm(["logcat", "--lines", "5"], env);
    expect(log.json).toMatchObject({ ok: true });
    expect(typeof log.json["text"]).toBe("string");
    expect((await farm(["input", "tap", "10", "10"], env)).json).toMatchObject({ ok: false, code: "LEASE_REQUIRED" });
    const bad = await farm(["input", "tap", "x", "10"], env);
    expect(bad.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "x" });

    const held = await acquireJson(["--device", phone.serial]);
    const leased = { ...env, FARM_LEASE: held.lease?.token as string };
    const key = await farm(["input", "key", "KEYCODE_HOME"], leased);
    expect(key.json).toMatchObject({ ok: true, dispatched: true, ambiguous: false });
    const text = await farm(["input", "text", "hello farm"], leased);
    expect(text.json).toMatchObject({ ok: true });
    const bootBefore = phone.device.bootId;
    const reboot = await farm(["reboot"], leased);
    expect(reboot.json).toMatchObject({ ok: true, dispatched: true });
    await waitFor("the phone back with a new boot id", async () => {
      const d = ((await farm(["devices"], lab.env)).json["devices"] as { serial: string; state: string; properties: { bootId: string } }[]).find((x) => x.serial === phone.serial);
      return d && d.state === "device" && d.properties.bootId && d.properties.bootId !== bootBefore ? true : undefined;
    }, { timeoutMs: 30_000 });
    const receipt = await farm(["device", "ownership", "receipt", "--action-id", String(reboot.json["actionId"])], leased);
    expect(receipt.json["action"]).toMatchObject({ kind: "reboot", state: "settled" });
    await farm(["lease", "release", "--lease", held.lease?.token as string], lab.env);
  });

  it("runs an interactive shell through a pseudo-terminal: typing, output, resize, exit code", async () => {
    const phone = phones[9] as { device: SimDevice; serial: string };
    const held = await acquireJson(["--device", phone.serial]);
    const term = ptySpawn(process.execPath, [farmBin, "shell", "--device", phone.serial], {
      cols: 100,
      rows: 30,
      env: { ...process.env, ...lab.env, FARM_LEASE: held.lease?.token as string, TERM: "xterm" } as Record<string, string>,
    });
    let screen = "";
    term.onData((d) => (screen += d));
    const exit = new Promise<number>((resolve) => term.onExit(({ exitCode }) => resolve(exitCode)));
    const seen = (text: string) => waitFor(`"${text}" on the terminal`, () => (screen.includes(text) ? true : undefined), { intervalMs: 20 });
    await seen("$ ");
    // The terminal echoes what is typed; only the shell's output expands $V.
    term.write("V=out; echo typed-$V\r");
    await seen("typed-out");
    term.write("stty size\r");
    await seen("30 100");
    term.resize(120, 40);
    await new Promise((r) => setTimeout(r, 300));
    term.write("stty size\r");
    await seen("40 120");
    term.write("exit 3\r");
    expect(await exit).toBe(3);
    const entries = (await farm(["activity", "--device", phone.serial], lab.env)).json["entries"] as { command: string; outcome: string }[];
    expect(entries.some((e) => e.command === "openShell" && e.outcome === "ok")).toBe(true);
    const status = await farm(["device", "ownership", "status", "--device", phone.serial], lab.env);
    const recent = (status.json["ownership"] as { recent: { kind: string; state: string; receiptJson: string }[] }).recent;
    expect(recent.find((a) => a.kind === "interactive-shell")).toMatchObject({ state: "settled" });
    await farm(["lease", "release", "--lease", held.lease?.token as string], lab.env);
  });

  it("saves a verified screenshot and installs an APK streamed through the coordinator", async () => {
    const phone = phones[1] as { device: SimDevice; serial: string };
    const env = { ...lab.env, FARM_DEVICE: phone.serial };
    const file = join(lab.dir.path, "shot.png");
    const shot = await farm(["screenshot", "--output", file], env);
    expect(shot.json).toMatchObject({ ok: true, file });
    const meta = await sharp(file).metadata();
    expect([meta.width, meta.height]).toEqual([shot.json["width"], shot.json["height"]]);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await farm(["screenshot", "--output", file], env)).json).toMatchObject({ ok: false, code: "EVIDENCE_OUTPUT_EXISTS" });

    const apk = join(lab.dir.path, "app.apk");
    await writeFile(apk, buildSimApk({ name: "com.example.installed", versionCode: 3, versionName: "1.2" }));
    expect((await farm(["install", apk], env)).json).toMatchObject({ ok: false, code: "LEASE_REQUIRED" });
    const held = await acquireJson(["--device", phone.serial]);
    const installed = await farm(["install", apk], { ...env, FARM_LEASE: held.lease?.token as string });
    expect(installed.json).toMatchObject({ ok: true, dispatched: true });
    expect(String(installed.json["output"])).toMatch(/^Success/);
    const path = await farm(["shell", "--", "pm", "path", "com.example.installed"], { ...env, FARM_LEASE: held.lease?.token as string });
    expect(String(path.json["stdout"])).toContain("package:");
    const broken = join(lab.dir.path, "broken.apk");
    await writeFile(broken, "not an apk");
    const bad = await farm(["install", broken], { ...env, FARM_LEASE: held.lease?.token as string });
    expect(bad.json).toMatchObject({ ok: false, code: "INSTALL_FAILED", dispatched: true, ambiguous: false });
    await farm(["lease", "release", "--lease", held.lease?.token as string], lab.env);
  });

  it("routes to exactly the alias named: works through either, fails DEVICE_OFFLINE when that one is gone", async () => {
    const bootId = "22222222-3333-4444-8555-666666666666";
    const a = await lab.addDevice({ serialno: "ALIASLEASE", bootId });
    const b = await lab.addDevice({ serialno: "ALIASLEASE", bootId });
    const held = await acquireJson(["--device", a.serial]);
    const env = { ...lab.env, FARM_LEASE: held.lease?.token as string };
    expect((await farm(["shell", "--device", b.serial, "--", "echo", "via-b"], env)).json).toMatchObject({ ok: true, stdout: "via-b\n" });
    await b.device.close();
    await waitFor("the alias offline", async () => ((await farm(["devices"], lab.env)).json["devices"] as { serial: string; state: string }[]).find((d) => d.serial === b.serial)?.state === "offline" ? true : undefined);
    const gone = await farm(["shell", "--device", b.serial, "--", "echo", "x"], env);
    expect(gone.json).toMatchObject({ ok: false, code: "DEVICE_OFFLINE", dispatched: false });
    expect((await farm(["shell", "--device", a.serial, "--", "echo", "via-a"], env)).json).toMatchObject({ ok: true, stdout: "via-a\n" });
    await farm(["lease", "release", "--lease", held.lease?.token as string], lab.env);
  });
});

/** `farm lease run` as its own process (so the test can kill it). */
async function startLeaseRun(selectors: string[], command: string[]) {
  const proc = spawn(process.execPath, [farmBin, "lease", "run", ...selectors, "--", ...command], { env: { ...process.env, ...lab.env }, stdio: "ignore" });
  return proc;
}
