import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { createLogger } from "@farm/shared/log";
import { toErrorReport, type ErrorReport } from "@farm/shared/errors";
import { AgentCallSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import {
  AgentControlService,
  StartAdbStreamRequestSchema,
  StartAdbStreamResponseSchema,
  StartAdbTunnelRequestSchema,
  StartAdbTunnelResponseSchema,
  StopAdbTunnelRequestSchema,
  StopAdbTunnelResponseSchema,
  StopAdbStreamRequestSchema,
  StopAdbStreamResponseSchema,
} from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { openAgentDb } from "../db/open-agent-db.js";
import { openHostJournalDb } from "../db/host-journal-db.js";
import { DeviceHistory } from "../devices/device-history.js";
import type { DeviceView, DeviceWatcher } from "../devices/device-watcher.js";
import { DeviceOwnership, type ActionKind } from "../ownership/device-ownership.js";
import { OwnershipJournal } from "../ownership/ownership-journal.js";
import { callDispatcher, type CallDispatcher } from "../rpc/call-dispatch.js";
import { agentControlService } from "../rpc/control-service.js";
import type { ServiceRoute } from "../rpc/routes.js";
import type { AgentServiceDeps } from "../rpc/service-deps.js";
import { startSimPhones, type SimPhones } from "../testing/sim-phones.js";
import { AdbTunnels } from "./adb-tunnels.js";
import { fakeServeAdbStream, readData, type FakeAdbStreamCall } from "./fake-serve-adb-stream.js";
import { rawAdbAction } from "./raw-adb-action.js";

/**
 * Remote adb tunnels on the agent, end to end from the routed call to a
 * simulated phone behind a real adb server. Only the coordinator's
 * ServeAdbStream is a stand-in (fake-serve-adb-stream.ts).
 */

const log = createLogger({ level: "error" });
const AGENT = "agent-tunnel-test";
const CONTROL = "farm.v1.AgentControlService";

let lab: SimPhones<unknown>;
let addr: AdbServerAddress;
let serial: string;

beforeAll(async () => {
  lab = await startSimPhones(1);
  serial = lab.phones[0]!.serial;
  addr = lab.addr;
}, 30_000);

afterAll(async () => {
  await lab?.stop();
});

/**
 * What the ownership layer asks of the DeviceWatcher: the phones behind
 * `phones` (serial -> physical id), each online (the real watcher reads
 * properties through adbkit, whose CommonJS default export vitest does not
 * load as Node does; e2e tests run it).
 */
function watcherOf(phones: Map<string, string>): DeviceWatcher {
  const view = (serialNow: string, physicalId: string): DeviceView => ({
    serial: serialNow,
    state: "device",
    facts: { props: {}, bootId: `boot-${physicalId}` },
    identity: { physicalId, identityStatus: "ok", pinLabel: "" },
  });
  const fake = {
    device: (s: string) => (phones.has(s) ? view(s, phones.get(s) ?? "") : undefined),
    aliasesOf: (p: string) => [...phones].filter(([, id]) => id === p).map(([s]) => s),
  };
  return fake as unknown as DeviceWatcher;
}

/** A serial the watcher still lists but the adb server no longer has. */
const GONE = "127.0.0.1:1";

let dir: string;
let host: ReturnType<typeof openHostJournalDb>;
let agentDb: ReturnType<typeof openAgentDb>;
let journal: OwnershipJournal;
let ownership: DeviceOwnership;
let coordinator: ReturnType<typeof fakeServeAdbStream>;
let tunnels: AdbTunnels;
let phones: Map<string, string>;
let dispatch: CallDispatcher;
/** The rules that refused services, as the agent's metrics count them. */
let refusedRules: string[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-tunnel-"));
  host = openHostJournalDb(dir);
  agentDb = openAgentDb(join(dir, "agent.db"));
  journal = new OwnershipJournal(host.db, host.sqlite);
  phones = new Map([
    [serial, "phys-sim-1"],
    [GONE, "phys-gone"],
  ]);
  const watcher = watcherOf(phones);
  ownership = new DeviceOwnership({ lockDir: dir, journal, watcher, history: new DeviceHistory(agentDb.db), agentId: AGENT, log });
  coordinator = fakeServeAdbStream();
  refusedRules = [];
  tunnels = new AdbTunnels({ adb: addr, serve: coordinator.serve, physicalIdOf: (s) => phones.get(s), log, maxStreamsPerTunnel: 3, onServiceRefused: (rule) => refusedRules.push(rule) });
  // The control service uses only these of the agent's deps.
  const deps: Pick<AgentServiceDeps, "ownership" | "adbTunnels" | "rawAdb" | "log"> = { ownership, adbTunnels: tunnels, rawAdb: rawAdbAction(), log };
  const route = { service: AgentControlService, impl: agentControlService(deps as AgentServiceDeps) } as unknown as ServiceRoute;
  dispatch = callDispatcher({ routes: [route], drainReason: () => "", log, hostPaths: [] });
});

afterEach(async () => {
  await tunnels.stopAll("test over");
  host.close();
  agentDb.close();
  await rm(dir, { recursive: true, force: true });
});

/** A routed call as the coordinator sends it on the control stream. */
async function call<I extends DescMessage, O extends DescMessage>(
  method: string,
  input: I,
  output: O,
  req: MessageInitShape<I>,
  opts: { requestedBy?: string; budgetMs?: number } = {},
): Promise<{ ok: MessageShape<O>; error?: undefined } | { ok?: undefined; error: ErrorReport }> {
  const res = await dispatch(
    create(AgentCallSchema, {
      commandId: `c-${Math.random()}`,
      method: `${CONTROL}/${method}`,
      deadline: timestampFromMs(Date.now() + (opts.budgetMs ?? 10_000)),
      requestedBy: opts.requestedBy ?? "alice",
      request: toBinary(input, create(input, req)),
    }),
  );
  if (res.error) {
    const d = res.error.detail;
    return { error: { ok: false, code: (d?.code ?? "") as ErrorReport["code"], message: res.error.message, ...(d?.field ? { field: d.field } : {}) } };
  }
  return { ok: fromBinary(output, res.response) };
}

const startTunnel = (tunnelId: string, opts: { requestedBy?: string; budgetMs?: number; serial?: string } = {}) =>
  call("StartAdbTunnel", StartAdbTunnelRequestSchema, StartAdbTunnelResponseSchema, { tunnelId, target: { serial: opts.serial ?? serial } }, opts);
const stopTunnel = (tunnelId: string, reason = "closed") => call("StopAdbTunnel", StopAdbTunnelRequestSchema, StopAdbTunnelResponseSchema, { tunnelId, reason });
const startStream = (tunnelId: string, streamId: string, service: string) => call("StartAdbStream", StartAdbStreamRequestSchema, StartAdbStreamResponseSchema, { tunnelId, streamId, service });

/** Opens a stream and returns its ServeAdbStream call, past the stream id. */
async function openStream(tunnelId: string, streamId: string, service: string): Promise<FakeAdbStreamCall> {
  const r = await startStream(tunnelId, streamId, service);
  expect(r.error).toBeUndefined();
  const c = await coordinator.nextCall();
  expect((await c.requests.next()).value).toMatchObject({ kind: { case: "streamId", value: streamId } });
  return c;
}

/** Another farm change to the phone, to see whether it gets the lock. */
const touch: ActionKind<Record<string, never>, Record<string, never>> = {
  kind: "touch",
  journalRequest: () => ({}),
  dispatch: () => Promise.resolve({ result: {}, receipt: { provenBy: "test" } }),
  prove: () => Promise.resolve(undefined),
};

/** An action that starts, then waits until the test lets it go: a change in progress. */
function gatedAction(): { slow: ActionKind<Record<string, never>, Record<string, never>>; letGo: () => void; started: () => boolean } {
  let letGo!: () => void;
  const gate = new Promise<void>((resolve) => (letGo = resolve));
  let started = false;
  const slow: ActionKind<Record<string, never>, Record<string, never>> = {
    ...touch,
    kind: "slow",
    async dispatch() {
      started = true;
      await gate;
      return { result: {}, receipt: { provenBy: "test" } };
    },
  };
  return { slow, letGo, started: () => started };
}

async function refusedBy(p: Promise<unknown>): Promise<ErrorReport> {
  try {
    await p;
  } catch (err) {
    return toErrorReport(err);
  }
  throw new Error("expected a refusal");
}

describe("remote adb tunnels", () => {
  it("opens shell:echo hi on the tunnel's phone through the adb server and relays its output", async () => {
    const opened = await startTunnel("t1");
    expect(opened.error).toBeUndefined();
    const actionId = opened.ok?.actionId ?? "";
    expect(journal.get(actionId)).toMatchObject({ kind: "raw-adb", state: "pending", serial, requestedBy: "alice" });

    const stream = await openStream("t1", "s1", "shell:echo hi");
    expect(await readData(stream.requests)).toEqual({ data: Buffer.from("hi\n"), ended: true });
    stream.end();
    expect(tunnels.bytes("t1")).toMatchObject({ fromDevice: 3, toDevice: 0 });
  });

  it("writes the caller's bytes to the device service", async () => {
    await startTunnel("t1");
    const stream = await openStream("t1", "s1", "shell:cat");
    stream.send(Buffer.from("ping\n"));
    expect(await readData(stream.requests, 5)).toEqual({ data: Buffer.from("ping\n"), ended: false });
    // The caller closes its stream: the device's service ends too.
    stream.end();
    expect((await readData(stream.requests)).ended).toBe(true);
    expect(tunnels.bytes("t1")).toMatchObject({ toDevice: 5, fromDevice: 5 });
  });

  it("with spare calls, starts a stream on a ServeAdbStream call opened before it was asked for, and closes the spare with its tunnel", async () => {
    await tunnels.stopAll("replaced by one with spare calls");
    tunnels = new AdbTunnels({ adb: addr, serve: coordinator.serve, physicalIdOf: (s) => phones.get(s), log, spareCalls: true });
    const deps: Pick<AgentServiceDeps, "ownership" | "adbTunnels" | "rawAdb" | "log"> = { ownership, adbTunnels: tunnels, rawAdb: rawAdbAction(), log };
    const route = { service: AgentControlService, impl: agentControlService(deps as AgentServiceDeps) } as unknown as ServiceRoute;
    dispatch = callDispatcher({ routes: [route], drainReason: () => "", log, hostPaths: [] });
    await startTunnel("t1");
    const first = await openStream("t1", "s1", "shell:echo one");
    expect((await readData(first.requests)).data.toString()).toBe("one\n");
    first.end();
    // Opened once the first stream ended (or ran a while), before any stream asks for it: nothing sent on it yet.
    const spare = await coordinator.nextCall();
    expect(spare.signal.aborted).toBe(false);
    expect((await startStream("t1", "s2", "shell:echo two")).error).toBeUndefined();
    expect((await spare.requests.next()).value).toMatchObject({ kind: { case: "streamId", value: "s2" } });
    expect(await readData(spare.requests)).toEqual({ data: Buffer.from("two\n"), ended: true });
    spare.end();
    const next = await coordinator.nextCall();
    expect(next.signal.aborted).toBe(false);
    expect((await stopTunnel("t1")).error).toBeUndefined();
    expect(next.signal.aborted).toBe(true);
  });

  it("with warm transports, opens each stream on the tunnel's connection made ahead, and still refuses a bad service before the phone is touched", async () => {
    await tunnels.stopAll("replaced by one with warm transports");
    tunnels = new AdbTunnels({ adb: addr, serve: coordinator.serve, physicalIdOf: (s) => phones.get(s), log, warmTransport: true, onServiceRefused: (rule) => refusedRules.push(rule) });
    const deps: Pick<AgentServiceDeps, "ownership" | "adbTunnels" | "rawAdb" | "log"> = { ownership, adbTunnels: tunnels, rawAdb: rawAdbAction(), log };
    const route = { service: AgentControlService, impl: agentControlService(deps as AgentServiceDeps) } as unknown as ServiceRoute;
    dispatch = callDispatcher({ routes: [route], drainReason: () => "", log, hostPaths: [] });
    await startTunnel("t1");
    for (const [id, word] of [["s1", "one"], ["s2", "two"], ["s3", "three"]] as const) {
      const stream = await openStream("t1", id, `shell:echo ${word}`);
      expect(await readData(stream.requests)).toEqual({ data: Buffer.from(`${word}\n`), ended: true });
      stream.end();
    }
    expect((await startStream("t1", "s4", "reboot:bootloader")).error).toMatchObject({ code: "INVALID_ARGUMENT", field: "service" });
    expect(tunnels.bytes("t1")).toMatchObject({ fromDevice: 4 + 4 + 6 });
    expect((await stopTunnel("t1")).error).toBeUndefined();
  });

  it("holds the phone for its owner: anyone else is refused at once as busy, naming the tunnel, its owner and how to close it", async () => {
    const opened = await startTunnel("t1", { requestedBy: "alice" });
    // Refused at once, not after waiting out the deadline (60 s here).
    const t0 = Date.now();
    const other = await refusedBy(ownership.run(touch, {}, { serial, deadlineMs: Date.now() + 60_000, requestedBy: "bob" }));
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(other).toMatchObject({ code: "DEVICE_BUSY", dispatched: false });
    expect(other.message).toMatch(/remote adb tunnel \(raw-adb\) on \S+ requested by alice/);
    expect(other.message).toContain(`farm adb disconnect --device ${serial}`);
    // A second tunnel to the same phone is refused at once too, even its owner's.
    const second = await startTunnel("t2", { requestedBy: "bob", budgetMs: 60_000 });
    expect(second.error).toMatchObject({ code: "DEVICE_BUSY" });
    expect(second.error?.message).toMatch(/remote adb tunnel .* requested by alice/);
    expect((await startTunnel("t3", { requestedBy: "alice", budgetMs: 60_000 })).error).toMatchObject({ code: "DEVICE_BUSY" });
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(ownership.status(serial).holder).toMatch(/remote adb tunnel \(raw-adb\).*requested by alice/);

    const stream = await openStream("t1", "s1", "shell:echo x");
    await readData(stream.requests);
    stream.end();
    expect((await stopTunnel("t1", "lease ended")).error).toBeUndefined();
    // Settled before StopAdbTunnel answered: the phone is free at once.
    const row = journal.get(opened.ok?.actionId ?? "");
    expect(row).toMatchObject({ kind: "raw-adb", state: "settled", settledBy: "completed" });
    expect(JSON.parse(row?.receiptJson ?? "{}")).toMatchObject({
      tunnelId: "t1",
      changes: "unknown",
      provenBy: expect.stringMatching(/cannot be proven/) as unknown,
      reason: "lease ended",
      streams: 1,
      bytesFromDevice: 2,
    });
    expect(ownership.status(serial).locked).toBe(false);
    await expect(ownership.run(touch, {}, { serial, deadlineMs: Date.now() + 800, requestedBy: "bob" })).resolves.toBeDefined();
  });

  it("lets its owner's farm changes run beside it, one at a time, each journaled with a concurrentRawAdb receipt", async () => {
    const opened = await startTunnel("t1", { requestedBy: "alice" });
    const tunnelAction = opened.ok?.actionId ?? "";
    // Two of the owner's changes: the second waits for the first (its turn), not for the tunnel.
    let letGo!: () => void;
    const gate = new Promise<void>((resolve) => (letGo = resolve));
    let running = 0;
    let most = 0;
    const slow: ActionKind<Record<string, never>, Record<string, never>> = {
      ...touch,
      kind: "slow",
      async dispatch() {
        running += 1;
        most = Math.max(most, running);
        await gate;
        running -= 1;
        return { result: {}, receipt: { provenBy: "test" } };
      },
    };
    const first = ownership.run(slow, {}, { serial, deadlineMs: Date.now() + 30_000, requestedBy: "alice" });
    const second = ownership.run(slow, {}, { serial, deadlineMs: Date.now() + 30_000, requestedBy: "alice" });
    await vi.waitFor(() => expect(running).toBe(1));
    letGo();
    const [a, b] = await Promise.all([first, second]);
    expect(most).toBe(1);
    for (const r of [a, b]) {
      const row = journal.get(r.action.actionId);
      expect(row).toMatchObject({ kind: "slow", state: "settled", requestedBy: "alice" });
      expect(JSON.parse(row?.receiptJson ?? "{}")).toMatchObject({ provenBy: "test", concurrentRawAdb: { actionId: tunnelAction, tunnelId: "t1" } });
    }
    // The tunnel is still open and still its raw-adb action.
    expect(journal.get(tunnelAction)).toMatchObject({ kind: "raw-adb", state: "pending" });
    expect(ownership.status(serial).locked).toBe(true);
    const stream = await openStream("t1", "s1", "shell:echo y");
    expect((await readData(stream.requests)).data.toString()).toBe("y\n");
    stream.end();
    expect((await stopTunnel("t1", "closed")).error).toBeUndefined();
    expect(journal.get(tunnelAction)).toMatchObject({ state: "settled" });
    expect(ownership.status(serial).locked).toBe(false);
    // Once the tunnel is closed, a change carries no marker.
    const after = await ownership.run(touch, {}, { serial, deadlineMs: Date.now() + 5_000, requestedBy: "alice" });
    expect(JSON.parse(journal.get(after.action.actionId)?.receiptJson ?? "{}")).not.toHaveProperty("concurrentRawAdb");
  });

  it("gives up an owner's change that did not get its turn by its deadline, without dispatching it, and keeps the turns in order", async () => {
    await startTunnel("t1", { requestedBy: "alice" });
    const { slow, letGo, started } = gatedAction();
    const first = ownership.run(slow, {}, { serial, deadlineMs: Date.now() + 30_000, requestedBy: "alice" });
    await vi.waitFor(() => expect(started()).toBe(true));
    const late = await refusedBy(ownership.run(touch, {}, { serial, deadlineMs: Date.now() + 800, requestedBy: "alice" }));
    expect(late).toMatchObject({ code: "DEVICE_BUSY", dispatched: false });
    expect(late.message).toMatch(/another of your actions beside your remote adb tunnel/);
    const third = ownership.run(touch, {}, { serial, deadlineMs: Date.now() + 30_000, requestedBy: "alice" });
    letGo();
    await first;
    const r = await third;
    expect(journal.get(r.action.actionId)).toMatchObject({ kind: "touch", state: "settled" });
    expect((await stopTunnel("t1", "closed")).error).toBeUndefined();
    expect(ownership.status(serial).locked).toBe(false);
  });

  it("keeps the phone until the owner's change beside it is done, even when the tunnel closes first", async () => {
    await startTunnel("t1", { requestedBy: "alice" });
    const { slow, letGo, started } = gatedAction();
    const beside = ownership.run(slow, {}, { serial, deadlineMs: Date.now() + 30_000, requestedBy: "alice" });
    await vi.waitFor(() => expect(started()).toBe(true));
    expect((await stopTunnel("t1", "closed")).error).toBeUndefined();
    // The change beside it still holds the phone: bob waits (and is told busy at his deadline), not refused for a tunnel.
    expect(ownership.status(serial).locked).toBe(true);
    const bob = ownership.run(touch, {}, { serial, deadlineMs: Date.now() + 30_000, requestedBy: "bob" });
    letGo();
    await beside;
    await expect(bob).resolves.toBeDefined();
    expect(ownership.status(serial).locked).toBe(false);
  });

  it("stopping a tunnel ends its open streams, and it takes no more", async () => {
    await startTunnel("t1");
    const a = await openStream("t1", "a", "shell:cat");
    const b = await openStream("t1", "b", "shell,v2,raw:cat");
    expect(tunnels.bytes("t1")?.openStreams).toBe(2);
    await stopTunnel("t1", "admin closed it");
    expect(a.signal.aborted && b.signal.aborted).toBe(true);
    expect((await readData(a.requests)).ended).toBe(true);
    expect(tunnels.bytes("t1")).toBeUndefined();
    expect((await startStream("t1", "c", "shell:echo")).error).toMatchObject({ code: "TUNNEL_NOT_FOUND", field: "tunnel_id" });
  });

  it("closes every tunnel when the control stream to the coordinator ends, and opens none until it is back", async () => {
    const opened = await startTunnel("t1");
    const stream = await openStream("t1", "s1", "shell:cat");
    tunnels.linkChanged(false);
    await once(stream.signal, "abort");
    await tunnels.get("t1")?.ended;
    expect(JSON.parse(journal.get(opened.ok?.actionId ?? "")?.receiptJson ?? "{}")).toMatchObject({ reason: "the control stream to the coordinator ended" });
    expect((await startTunnel("t2")).error).toMatchObject({ code: "COORDINATOR_UNAVAILABLE" });
    tunnels.linkChanged(true);
    expect((await startTunnel("t2")).error).toBeUndefined();
  });

  it("refuses a second tunnel with the same id; stopping an unknown one is a no-op", async () => {
    await startTunnel("t1");
    expect((await startTunnel("t1")).error).toMatchObject({ code: "ALREADY_EXISTS", field: "tunnel_id" });
    expect((await stopTunnel("nope")).error).toBeUndefined();
    expect(tunnels.get("t1")?.running).toBe(true);
    expect((await startTunnel("")).error).toMatchObject({ code: "INVALID_ARGUMENT", field: "tunnel_id" });
  });

  it("refuses bad streams before touching the phone, and passes the phone's refusal on", async () => {
    expect((await startStream("nope", "s1", "shell:echo")).error).toMatchObject({ code: "TUNNEL_NOT_FOUND", field: "tunnel_id" });
    const opened = await startTunnel("t1");
    for (const service of ["host:version", "host:transport:other", "host:kill", "reverse:forward:tcp:1;tcp:2"]) {
      expect((await startStream("t1", "s1", service)).error).toMatchObject({ code: "INVALID_ARGUMENT", field: "service" });
    }
    expect((await startStream("t1", "", "shell:")).error).toMatchObject({ code: "INVALID_ARGUMENT", field: "stream_id" });
    // Nothing reached the phone: a tunnel closed now changed nothing.
    expect(tunnels.get("t1")?.used).toBe(false);

    // A device service this phone does not offer: its refusal is the call's error.
    const refused = await startStream("t1", "s2", "track-app");
    expect(refused.error?.code).toMatch(/^(ADB_REFUSED|ADB_CONNECTION_LOST)$/);
    expect(refused.error?.message).toContain(`${serial} did not open the adb service track-app`);
    expect(tunnels.bytes("t1")?.openStreams).toBe(0);

    const dup = await openStream("t1", "s3", "shell:cat");
    expect((await startStream("t1", "s3", "shell:cat")).error).toMatchObject({ code: "ALREADY_EXISTS", field: "stream_id" });
    dup.end();
    await stopTunnel("t1");
    expect(JSON.parse(journal.get(opened.ok?.actionId ?? "")?.receiptJson ?? "{}")).toMatchObject({ changes: "unknown", streams: 1 });
  });

  it("refuses services that would strand the phone or reach off it, counting each by its rule, before the phone is touched", async () => {
    const opened = await startTunnel("t1");
    for (const service of ["reboot:bootloader", "reboot:recovery", "reboot:sideload", "reboot:sideload-auto-reboot", "reboot:fastboot", "tcp:10.0.2.2:5037", "tcp:8080:10.0.2.2", "reverse:list-forward"]) {
      const r = await startStream("t1", "s1", service);
      expect(r.error, service).toMatchObject({ code: "INVALID_ARGUMENT", field: "service" });
    }
    expect(refusedRules).toEqual(["reboot-mode", "reboot-mode", "reboot-mode", "reboot-mode", "reboot-mode", "tcp-host", "tcp-host", "reverse"]);
    expect(tunnels.get("t1")?.used).toBe(false);
    // The phone's own loopback is still forwarded to (nothing listens there: the phone's refusal, not the farm's).
    const loopback = await startStream("t1", "s2", "tcp:127.0.0.1:1");
    expect(loopback.error?.message).toContain(`${serial} did not open the adb service tcp:`);
    expect(refusedRules).toHaveLength(8);
    await stopTunnel("t1");
    expect(journal.get(opened.ok?.actionId ?? "")?.state).toBe("settled");
  });

  it("bounds the streams one tunnel has open", async () => {
    await startTunnel("t1");
    const open = [await openStream("t1", "a", "shell:cat"), await openStream("t1", "b", "shell:cat"), await openStream("t1", "c", "shell:cat")];
    expect((await startStream("t1", "d", "shell:cat")).error).toMatchObject({ code: "TUNNEL_LIMIT", field: "stream_id" });
    // One ends: there is room again.
    const first = tunnels.get("t1")?.streams.get("a");
    open[0]!.end();
    expect((await readData(open[0]!.requests)).ended).toBe(true);
    await first?.done;
    expect(tunnels.bytes("t1")?.openStreams).toBe(2);
    await openStream("t1", "d", "shell:cat");
  });

  it("fails a stream when the tunnel's phone has left the adb server", async () => {
    await startTunnel("t1", { serial: GONE });
    const r = await startStream("t1", "s1", "shell:echo hi");
    expect(r.error?.code).toBe("DEVICE_OFFLINE");
    expect(r.error?.message).toContain(`${GONE} did not open the adb service shell:`);
  });

  it("never follows the serial to another phone: a serial that now reaches a different phone is refused", async () => {
    await startTunnel("t1");
    phones.set(serial, "phys-someone-else");
    const r = await startStream("t1", "s1", "shell:echo hi");
    expect(r.error).toMatchObject({ code: "DEVICE_OFFLINE" });
    expect(r.error?.message).toMatch(/now reaches another phone/);
    expect(tunnels.get("t1")?.used).toBe(false);
  });

  it("a tunnel closed before any stream says it changed nothing", async () => {
    const opened = await startTunnel("t1");
    await stopTunnel("t1", "closed");
    const receipt = JSON.parse(journal.get(opened.ok?.actionId ?? "")?.receiptJson ?? "{}") as Record<string, unknown>;
    expect(receipt).toMatchObject({ changes: "none", streams: 0, reason: "closed" });
  });

  it("StopAdbStream cuts one stream whose phone reads nothing, gives its room and bytes back, and is a no-op for a stream already gone", async () => {
    await startTunnel("t1");
    // `sleep` never reads its stdin: what the caller sends stays with the agent and the adb server.
    const stalled = await openStream("t1", "s1", "shell:sleep 60");
    const other = await openStream("t1", "s2", "shell:cat");
    stalled.send(Buffer.alloc(64 * 1024, 1));
    expect(tunnels.openStreams()).toBe(2);
    const stop = (streamId: string) => call("StopAdbStream", StopAdbStreamRequestSchema, StopAdbStreamResponseSchema, { tunnelId: "t1", streamId });
    expect((await stop("s1")).error).toBeUndefined();
    // Its ServeAdbStream call is cancelled and its device socket closed; the other stream goes on.
    await vi.waitFor(() => expect(stalled.signal.aborted).toBe(true), { timeout: 10_000 });
    await vi.waitFor(() => expect(tunnels.openStreams()).toBe(1), { timeout: 10_000 });
    expect(tunnels.budget.held).toBe(0);
    other.send(Buffer.from("still here\n"));
    expect((await readData(other.requests, 11)).data.toString()).toBe("still here\n");
    expect((await stop("s1")).error).toBeUndefined();
    expect((await stop("nope")).error).toBeUndefined();
    other.end();
  });
});
