import { afterEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { AgentHelloSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { agents } from "../db/schema.js";
import { Liveness } from "./liveness.js";
import { Registry } from "./registry.js";
import type { HeartbeatRow } from "./registry-store.js";
import { SqliteRegistryStore } from "./sqlite-registry-store.js";

// A fake clock: time moves only when a test says so.
let now = 1_700_000_000_000;
const clock = () => now;

let opened: OpenedDatabase | undefined;

afterEach(() => {
  opened?.close();
  opened = undefined;
});

function codeOf(err: unknown): string {
  return ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.code ?? "";
}

const hello = create(AgentHelloSchema, { agentId: "a-1", name: "lab-1", hostname: "h", agentVersion: "t", protocolVersion: 2, heartbeatIntervalMs: 1000 });
const storedHeartbeat = (db: OpenedDatabase) => db.db.select().from(agents).get()?.lastHeartbeatAt;

describe("Liveness", () => {
  it("counts an agent overdue only after `misses` whole intervals, and never one that has not beaten", () => {
    const l = new Liveness({ saveHeartbeats: async () => undefined }, 3);
    const agent = { id: "a", heartbeatIntervalMs: 1_000, lastHeartbeatAt: now };
    expect(l.overdue(agent, now + 3_000)).toBeUndefined();
    const err = l.overdue(agent, now + 3_001);
    expect(codeOf(err)).toBe("AGENT_HEARTBEAT_MISSED");
    expect(err?.message).toContain("no heartbeat for 3001 ms (3 intervals of 1000 ms)");
    expect(l.overdue({ ...agent, lastHeartbeatAt: null }, now + 1e9)).toBeUndefined();
  });

  it("writes batched heartbeats in one call, for the agents still known, once", async () => {
    const writes: HeartbeatRow[][] = [];
    const l = new Liveness({ saveHeartbeats: async (rows) => void writes.push([...rows]) }, 3);
    const a = { id: "a", heartbeatIntervalMs: 1_000, lastHeartbeatAt: 5 };
    const b = { id: "b", heartbeatIntervalMs: 1_000, lastHeartbeatAt: 6 };
    l.beat(a);
    l.beat(b);
    l.beat(a);
    await l.flush((id) => (id === "a" ? a : undefined));
    await l.flush(() => a);
    expect(writes).toEqual([[{ agentId: "a", lastHeartbeatAt: 5 }]]);
  });

  it("keeps heartbeats it could not write for the next flush", async () => {
    const writes: HeartbeatRow[][] = [];
    let fail = true;
    const l = new Liveness({
      saveHeartbeats: async (rows) => {
        if (fail) throw new Error("database down");
        writes.push([...rows]);
      },
    }, 3);
    const a = { id: "a", heartbeatIntervalMs: 1_000, lastHeartbeatAt: 5 };
    l.beat(a);
    await expect(l.flush(() => a)).rejects.toThrow("database down");
    fail = false;
    await l.flush(() => a);
    expect(writes).toEqual([[{ agentId: "a", lastHeartbeatAt: 5 }]]);
  });

  it("keeps a registry's heartbeats in memory until flushed, and writes one at once when the agent goes offline", async () => {
    opened = openDatabase(":memory:");
    const registry = await Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 3, now: clock });
    const session = { terminate: () => undefined };
    await registry.attach(hello, session);
    const attachedAt = now;
    now += 500;
    registry.heartbeat("a-1");
    expect(storedHeartbeat(opened)).toBe(attachedAt);
    await registry.flushHeartbeats();
    expect(storedHeartbeat(opened)).toBe(now);

    now += 700;
    registry.heartbeat("a-1");
    await registry.detach("a-1", session);
    expect(storedHeartbeat(opened)).toBe(now);
  });

  it("ends the session of an agent that stopped beating, writing its last heartbeat", async () => {
    opened = openDatabase(":memory:");
    const registry = await Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 2, now: clock });
    const ended: Error[] = [];
    await registry.attach(hello, { terminate: (e) => ended.push(e) });
    now += 400;
    registry.heartbeat("a-1");
    const last = now;
    now += 2_000;
    expect(await registry.sweep()).toEqual([]);
    now += 1;
    expect(await registry.sweep()).toEqual(["a-1"]);
    expect(ended.map(codeOf)).toEqual(["AGENT_HEARTBEAT_MISSED"]);
    expect(storedHeartbeat(opened)).toBe(last);
    // Already offline: a later sweep does not end it again.
    now += 10_000;
    expect(await registry.sweep()).toEqual([]);
    expect(ended).toHaveLength(1);
  });

  it("does not count the time its reports wait to be written against an agent, and counts its silence from the write's end", async () => {
    opened = openDatabase(":memory:");
    const store = new SqliteRegistryStore(opened.db);
    // The database is slow (as a replica's pool is when a fleet attaches): the inventory's write waits until let go.
    let letGo: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (letGo = resolve));
    const replaceDevices = store.replaceDevices.bind(store);
    store.replaceDevices = async (...args) => {
      await held;
      return await replaceDevices(...args);
    };
    const registry = await Registry.open(store, { heartbeatMisses: 2, now: clock });
    const ended: Error[] = [];
    await registry.attach(hello, { terminate: (e) => ended.push(e) });
    registry.heartbeat("a-1");
    const written = registry.replaceInventory("a-1", []);
    // Far past two intervals while the write waits: the agent's heartbeats wait unread behind it, so it is not ended.
    now += 5_000;
    const sweeping = registry.sweep();
    expect(ended).toEqual([]);
    expect(await sweeping).toEqual([]);
    letGo();
    await written;
    // Its silence counts from the write's end: two intervals later it is in time, a millisecond more and it is not.
    now += 2_000;
    expect(await registry.sweep()).toEqual([]);
    now += 1;
    expect(await registry.sweep()).toEqual(["a-1"]);
    expect(ended.map(codeOf)).toEqual(["AGENT_HEARTBEAT_MISSED"]);
    expect(ended[0]?.message).toContain("no heartbeat for 7001 ms");
  });

  it("skips sweeps before the earliest deadline, yet ends on time an agent that attached since with a shorter interval", async () => {
    opened = openDatabase(":memory:");
    const registry = await Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 2, now: clock });
    const ended: string[] = [];
    await registry.attach(create(AgentHelloSchema, { ...hello, agentId: "slow", name: "slow", heartbeatIntervalMs: 60_000 }), { terminate: () => ended.push("slow") });
    now += 1_000;
    // Nothing can be due for two minutes: this sweep reads no agent, and ends none.
    expect(await registry.sweep()).toEqual([]);
    await registry.attach(create(AgentHelloSchema, { ...hello, agentId: "fast", name: "fast", heartbeatIntervalMs: 100 }), { terminate: () => ended.push("fast") });
    now += 200;
    expect(await registry.sweep()).toEqual([]);
    now += 1;
    expect(await registry.sweep()).toEqual(["fast"]);
    // The slow one's beats keep it; once they stop, it is ended at its own deadline, not later.
    now += 60_000;
    registry.heartbeat("slow");
    const beat = now;
    now = beat + 120_000;
    expect(await registry.sweep()).toEqual([]);
    now += 1;
    expect(await registry.sweep()).toEqual(["slow"]);
    expect(ended).toEqual(["fast", "slow"]);
  });

  it("tells a sweep when an agent it tracks may be overdue, and only then", () => {
    const l = new Liveness({ saveHeartbeats: async () => undefined }, 3);
    expect(l.sweepDue(now)).toBe(false);
    l.track({ id: "a", heartbeatIntervalMs: 1_000, lastHeartbeatAt: now });
    l.track({ id: "b", heartbeatIntervalMs: 5_000, lastHeartbeatAt: now });
    l.track({ id: "never", heartbeatIntervalMs: 50, lastHeartbeatAt: null });
    expect(l.sweepDue(now + 3_000)).toBe(false);
    expect(l.sweepDue(now + 3_001)).toBe(true);
    // A due sweep starts a new count: until it tracks again, nothing is due.
    expect(l.sweepDue(now + 1e9)).toBe(false);
  });
});
