/**
 * The live screen and remote adb through a replica that does not hold the
 * phone's agent: two `farm coordinator` processes on one PostgreSQL
 * database, the agent attached to replica 0 (A), every user call to
 * replica 1 (B). B carries the phone's screen once however many watch it
 * there (ReplicaService.RelayScreen), and a tunnel's adb streams both ways
 * (RelayTunnel, RelayAdbStream); A checks the lease again and holds what
 * runs on the agent, so B's death releases it.
 */
import type { ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { toErrorReport } from "@farm/shared/errors";
import { create } from "@bufbuild/protobuf";
import { AdbTunnelService, OpenAdbStreamRequestSchema, type OpenAdbStreamRequest } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { LiveScreenService } from "@farm/shared/gen/farm/v1/live_screen_service_pb";
import { runAdb, startAdbServer, type AdbServer } from "../devsim/index.js";
import { connectForeground, type ForegroundTunnel } from "../support/adb-connect.js";
import { farm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { startReplicaLab, type ReplicaLab } from "../support/replica-lab.js";

let lab: ReplicaLab | undefined;
let user: AdbServer | undefined;
let serial = "";
let envs: NodeJS.ProcessEnv[] = [];
let alice = "";
let bob = "";
const children: ChildProcess[] = [];

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

function clientOf<S extends typeof LiveScreenService | typeof AdbTunnelService>(service: S, replica: number, token: string, lease?: string) {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    if (lease) req.header.set("x-farm-lease", lease);
    return next(req);
  };
  return createClient(service, createGrpcTransport({ baseUrl: (lab as ReplicaLab).urlOf(replica), interceptors: [auth] }));
}

/** A gauge from a replica's /metrics. */
async function metric(replica: number, name: string): Promise<number | undefined> {
  const line = (await (await fetch(`${(lab as ReplicaLab).urlOf(replica)}/metrics`)).text()).split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(" ")[1]);
}

/** Alice's lease on the phone, taken through B. */
async function aliceLease(replica = 1): Promise<string> {
  const r = await farm(["lease", "acquire", "--device", serial, "--ttl", "10m"], { ...envs[replica], FARM_TOKEN: alice });
  expect(r.json, r.stderr).toMatchObject({ ok: true });
  return String((r.json["lease"] as { token: string }).token);
}

async function release(lease: string): Promise<void> {
  expect((await farm(["lease", "release"], { ...envs[1], FARM_TOKEN: alice, FARM_LEASE: lease })).code).toBe(0);
}

/** What the user's adb server says of a serial: "device", "offline", or "gone". */
async function stateOf(local: string): Promise<string> {
  const r = await runAdb((user as AdbServer).port, ["devices"]);
  const line = r.stdout.split("\n").find((l) => l.startsWith(`${local}\t`));
  return line ? (line.split("\t")[1] ?? "").trim() : "gone";
}

/** The phone's raw-adb actions in the agent's journal, read through A. */
async function rawAdbActions(): Promise<{ actionId: string; state: string }[]> {
  const status = await farm(["device", "ownership", "status", "--device", serial], envs[0]);
  const recent = ((status.json["ownership"] ?? { recent: [] }) as { recent: { actionId: string; kind: string; state: string }[] }).recent;
  return recent.filter((a) => a.kind === "raw-adb");
}

/** `farm adb connect --foreground` through B (or another replica) under alice's lease. */
async function tunnelThroughB(lease: string, replica = 1): Promise<ForegroundTunnel & { local: string }> {
  const t = await connectForeground({ ...envs[replica], FARM_TOKEN: alice, FARM_LEASE: lease, FARM_DEVICE: serial, ANDROID_ADB_SERVER_PORT: String((user as AdbServer).port) });
  children.push(t.proc);
  expect(t.answer, t.stderr()).toMatchObject({ ok: true, device: serial });
  const local = String(t.answer["serial"]);
  await waitFor("the tunnel listed as a device by the user's adb", async () => ((await stateOf(local)) === "device" ? true : undefined));
  return { ...t, local };
}

beforeAll(async () => {
  // Replica 2 (C) stays for the last test, after B is killed: A's death seen from C.
  lab = await startReplicaLab("replica-links", { agentName: "lab", serialno: "RLINKS01", replicas: 3 });
  ({ serial, envs } = lab);
  alice = String((await farm(["token", "create", "--kind", "user", "--name", "alice", "--role", "operator"], envs[0])).json["token"]);
  bob = String((await farm(["token", "create", "--kind", "user", "--name", "bob", "--role", "operator"], envs[0])).json["token"]);
  user = await startAdbServer();
}, 120_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await user?.stop();
  await lab?.stop();
});

describe("live screen and remote adb through a replica not holding the agent", () => {
  it("streams the screen to the holder through B, one relay per phone however many watch there; others are refused; the lease's end ends it on the agent", async () => {
    const lease = await aliceLease();
    const watchers = [new AbortController(), new AbortController()];
    const views = watchers.map((stop) => clientOf(LiveScreenService, 1, alice, lease).watchScreen({ target: { serial } }, { signal: stop.signal })[Symbol.asyncIterator]());
    for (const v of views) {
      const first = await v.next();
      expect(first.value?.event?.kind.case).toBe("format");
      const second = await v.next();
      expect(second.value?.event?.kind).toMatchObject({ case: "frame", value: { key: true } });
    }
    // B has one feed with both viewers; A has the one agent stream with one viewer: B's relay.
    expect(await metric(1, "farm_live_screens")).toBe(1);
    expect(await metric(1, "farm_live_screen_viewers")).toBe(2);
    expect(await metric(0, "farm_live_screens")).toBe(1);
    expect(await metric(0, "farm_live_screen_viewers")).toBe(1);

    // Someone else's screen, through either replica: refused before anything starts.
    for (const replica of [1, 0]) {
      const refused = await (async () => {
        for await (const _ of clientOf(LiveScreenService, replica, bob).watchScreen({ target: { serial } })) return "watched";
        return "ended";
      })().catch((e: unknown) => e);
      expect(toErrorReport(refused)).toMatchObject({ code: "LEASE_HELD_BY_OTHER" });
    }

    // The lease's end (through B) ends both views with why, and the agent's stream on A.
    const ends = views.map((v) =>
      (async () => {
        for (;;) if ((await v.next()).done) return "ended";
      })().catch((e: unknown) => e)
    );
    await release(lease);
    for (const end of ends) expect(toErrorReport(await end)).toMatchObject({ code: expect.stringMatching(/^LEASE_(RELEASED|EXPIRED)$/) as unknown });
    await waitFor("the phone's screen stream ended on A", async () => ((await metric(0, "farm_live_screens")) === 0 ? true : undefined));
    await waitFor("no feed left on B", async () => ((await metric(1, "farm_live_screens")) === 0 ? true : undefined));
  });

  it("puts the phone in the user's adb through B: shell exit codes, a 20 MiB push and pull; A holds the tunnel and the lease's end closes it", async () => {
    const lease = await aliceLease();
    const tunnel = await tunnelThroughB(lease);
    const adb = (args: string[]) => runAdb((user as AdbServer).port, ["-s", tunnel.local, ...args], { timeoutMs: 120_000 });
    const exit = await adb(["shell", "echo out; echo err >&2; exit 7"]);
    expect(exit).toMatchObject({ code: 7 });
    expect(exit.stdout.trim()).toBe("out");
    expect(exit.stderr.trim()).toBe("err");

    const dir = (lab as ReplicaLab).dir.path;
    const big = randomBytes(20 * 1024 * 1024);
    await writeFile(join(dir, "big.bin"), big);
    expect((await adb(["push", join(dir, "big.bin"), "/sdcard/big.bin"])).code).toBe(0);
    expect((await adb(["pull", "/sdcard/big.bin", join(dir, "big-back.bin")])).code).toBe(0);
    expect(sha256(await readFile(join(dir, "big-back.bin")))).toBe(sha256(big));

    // The tunnel is B's (where alice called), held on the agent by A: both list it, with B's id.
    const tunnelId = String(tunnel.answer["tunnel"]);
    const onB = await clientOf(AdbTunnelService, 1, alice).listTunnels({ mine: true });
    expect(onB.tunnels.map((t) => t.tunnelId)).toEqual([tunnelId]);
    expect(Number(onB.tunnels[0]?.bytesToDevice)).toBeGreaterThanOrEqual(big.length);
    const onA = await clientOf(AdbTunnelService, 0, String((lab as ReplicaLab).admin)).listTunnels({});
    expect(onA.tunnels.map((t) => t.tunnelId)).toEqual([tunnelId]);

    // Bob cannot use or close alice's tunnel through either replica.
    const bobStream = clientOf(AdbTunnelService, 1, bob).openAdbStream(
      (async function* () {
        yield { kind: { case: "start" as const, value: { tunnelId, service: "shell:echo hi" } } };
      })(),
    );
    const bobTried = await (async () => {
      for await (const _ of bobStream) return "opened";
      return "ended";
    })().catch((e: unknown) => e);
    expect(toErrorReport(bobTried)).toMatchObject({ code: "TUNNEL_NOT_FOUND" });

    await release(lease);
    // LEASE_RELEASED exits 77 (docs/cli.md, Exit codes), as on one coordinator.
    expect(await tunnel.exited).toBe(77);
    expect(tunnel.lines.join("\n")).toMatch(/LEASE_RELEASED/);
    await waitFor("the tunnel gone from the user's adb", async () => ((await stateOf(tunnel.local)) === "gone" ? true : undefined));
    await waitFor("the tunnel gone from A", async () => ((await clientOf(AdbTunnelService, 0, String((lab as ReplicaLab).admin)).listTunnels({})).tunnels.length === 0 ? true : undefined));
    expect((await rawAdbActions()).every((a) => a.state !== "pending")).toBe(true);
  }, 180_000);

  it("holds a slow viewer and a phone that reads nothing to bounded bytes on both replicas: viewers resync at key frames, adb bytes wait for the phone", async () => {
    const lease = await aliceLease();
    const phone = (lab as ReplicaLab).phone;
    // A viewer through B that reads the format and then nothing, on HTTP/2's default 64 KiB window.
    const stop = new AbortController();
    const stalled = clientOf(LiveScreenService, 1, alice, lease).watchScreen({ target: { serial } }, { signal: stop.signal })[Symbol.asyncIterator]();
    expect((await stalled.next()).value?.event?.kind.case).toBe("format");
    const resyncsBefore = (await metric(1, "farm_live_screen_resyncs_total")) ?? 0;
    let flip = false;
    const driver = setInterval(() => {
      flip = !flip;
      if (flip) phone.state.screen.start("com.android.settings");
      else phone.state.screen.home();
    }, 50);
    try {
      // B resynchronizes its stalled viewer; what waits for it (on B) and for B's relay (on A) stays under a viewer's 4 MiB.
      await waitFor("B resynchronizing the stalled viewer", async () => (((await metric(1, "farm_live_screen_resyncs_total")) ?? 0) > resyncsBefore ? true : undefined), { timeoutMs: 30_000, intervalMs: 250 });
      for (let i = 0; i < 4; i++) {
        expect(await metric(1, "farm_live_screen_queued_bytes")).toBeLessThanOrEqual(4 * 1024 * 1024);
        expect(await metric(0, "farm_live_screen_queued_bytes")).toBeLessThanOrEqual(4 * 1024 * 1024);
        await new Promise((r) => setTimeout(r, 250));
      }
    } finally {
      clearInterval(driver);
      stop.abort();
    }

    // An adb stream through B into a phone that reads nothing: 64 MiB offered.
    phone.faults.set({ hangServices: ["exec:cat"] });
    const tunnelCall = new AbortController();
    const pushing = new AbortController();
    try {
      const tunnels = clientOf(AdbTunnelService, 1, alice, lease);
      const events = tunnels.openTunnel({ target: { serial } }, { signal: tunnelCall.signal })[Symbol.asyncIterator]();
      const opened = await events.next();
      if (opened.done || opened.value.kind.case !== "opened") throw new Error("the tunnel did not open");
      const tunnelId = opened.value.kind.value.tunnelId;
      const chunk = Buffer.alloc(64 * 1024, 0x62);
      const offered = 64 * 1024 * 1024;
      let sent = 0;
      async function* feed(): AsyncGenerator<OpenAdbStreamRequest> {
        yield create(OpenAdbStreamRequestSchema, { kind: { case: "start", value: { tunnelId, service: "exec:cat" } } });
        for (; sent < offered; sent += chunk.length) yield create(OpenAdbStreamRequestSchema, { kind: { case: "data", value: chunk } });
        await new Promise((r) => pushing.signal.addEventListener("abort", r, { once: true }));
      }
      const ended = (async () => {
        for await (const _ of tunnels.openAdbStream(feed(), { signal: pushing.signal })) void _;
      })().catch((e: unknown) => e);
      const bytesOn = async (replica: number) => {
        const token = replica === 1 ? alice : String((lab as ReplicaLab).admin);
        const t = (await clientOf(AdbTunnelService, replica, token).listTunnels({})).tunnels.find((x) => x.tunnelId === tunnelId);
        return Number(t?.bytesToDevice ?? 0);
      };
      await waitFor("bytes reaching A", async () => ((await bytesOn(0)) >= 2 * 1024 * 1024 ? true : undefined), { timeoutMs: 60_000 });
      // Read B first, then A (A's count only grows): what B took and A has not is at most B's queue,
      // one relayed message and the link's stream window (4 MiB), never the whole offer.
      let widest = 0;
      for (let i = 0; i < 10; i++) {
        const onB = await bytesOn(1);
        const onA = await bytesOn(0);
        widest = Math.max(widest, onB - onA);
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(widest).toBeLessThanOrEqual(5 * 1024 * 1024);
      // The phone reads nothing: the caller is held back long before its 64 MiB are taken.
      expect(sent).toBeLessThan(offered);
      expect(await bytesOn(1)).toBeLessThan(offered / 2);
      pushing.abort();
      await ended;
    } finally {
      pushing.abort();
      tunnelCall.abort();
      phone.faults.set({ hangServices: [] });
    }
    await waitFor("the tunnel gone from A", async () => ((await clientOf(AdbTunnelService, 0, String((lab as ReplicaLab).admin)).listTunnels({})).tunnels.length === 0 ? true : undefined));
    await release(lease);
  }, 180_000);

  it("when B is killed mid-stream: the adb client and the viewer hear it, and A stops the tunnel and the screen on the agent", async () => {
    const lease = await aliceLease();
    const before = new Set((await rawAdbActions()).map((a) => a.actionId));
    const tunnel = await tunnelThroughB(lease);
    const action = await waitFor("the tunnel's raw-adb action pending on the agent", async () => (await rawAdbActions()).find((a) => !before.has(a.actionId) && a.state === "pending"));
    // A stream that stays open: a shell that reads until it is cut.
    const hanging = runAdb((user as AdbServer).port, ["-s", tunnel.local, "shell", "cat"], { timeoutMs: 60_000 });
    const view = clientOf(LiveScreenService, 1, alice, lease).watchScreen({ target: { serial } })[Symbol.asyncIterator]();
    expect((await view.next()).value?.event?.kind.case).toBe("format");
    expect(await metric(0, "farm_live_screens")).toBe(1);

    ((lab as ReplicaLab).replicas[1] as FarmProcess).kill("SIGKILL");

    // The user's side: the tunnel process says it lost its coordinator and exits; the view fails.
    expect(await tunnel.exited).toBe(69);
    expect(JSON.parse(tunnel.lines.at(-1) ?? "{}")).toMatchObject({ ok: false, code: "COORDINATOR_UNAVAILABLE", field: "coordinator" });
    await expect((async () => {
      for (;;) if ((await view.next()).done) return "ended";
    })()).rejects.toThrow();
    await hanging;
    // The agent's side, through A: the tunnel's action settles, the tunnel and the screen stream end.
    const settled = await waitFor("the tunnel's action settled on the agent", async () => {
      const a = (await rawAdbActions()).find((x) => x.actionId === action.actionId);
      return a && a.state !== "pending" ? a : undefined;
    });
    expect(settled.state).toBe("settled");
    await waitFor("the tunnel gone from A", async () => ((await clientOf(AdbTunnelService, 0, String((lab as ReplicaLab).admin)).listTunnels({})).tunnels.length === 0 ? true : undefined));
    await waitFor("the phone's screen stream ended on A", async () => ((await metric(0, "farm_live_screens")) === 0 ? true : undefined));
    // The phone is free for the holder's next command, through A.
    const r = await farm(["shell", "--device", serial, "--", "echo", "after"], { ...envs[0], FARM_TOKEN: alice, FARM_LEASE: lease });
    expect(r.json, r.stderr).toMatchObject({ ok: true, stdout: "after\n" });
    expect((await farm(["lease", "release"], { ...envs[0], FARM_TOKEN: alice, FARM_LEASE: lease })).code).toBe(0);
  }, 120_000);

  it("when A (holding the agent) is killed: the tunnel and the view through C end with AGENT_OFFLINE", async () => {
    const lease = await aliceLease(2);
    const tunnel = await tunnelThroughB(lease, 2);
    const view = clientOf(LiveScreenService, 2, alice, lease).watchScreen({ target: { serial } })[Symbol.asyncIterator]();
    expect((await view.next()).value?.event?.kind.case).toBe("format");
    const viewEnded = (async () => {
      for (;;) if ((await view.next()).done) return "ended";
    })().catch((e: unknown) => e);

    ((lab as ReplicaLab).replicas[0] as FarmProcess).kill("SIGKILL");

    // AGENT_OFFLINE exits 69: the farm could not serve it, as when the agent itself goes.
    expect(await tunnel.exited).toBe(69);
    expect(JSON.parse(tunnel.lines.at(-1) ?? "{}")).toMatchObject({ ok: false, code: "AGENT_OFFLINE" });
    expect(toErrorReport(await viewEnded)).toMatchObject({ code: "AGENT_OFFLINE" });
    await waitFor("the tunnel gone from the user's adb", async () => ((await stateOf(tunnel.local)) === "gone" ? true : undefined));
  }, 120_000);
});
