import { afterEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { AgentHelloSchema, DeviceReportSchema, type DeviceReport } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { sqliteDatabase, type FarmDatabase } from "../db/database.js";
import { Registry, type AgentSession } from "./registry.js";
import { type RegistryStore } from "./registry-store.js";
import { createRegistryStore } from "../db/stores.js";

let database: FarmDatabase | undefined;

afterEach(async () => {
  await database?.close();
  database = undefined;
});

const session = (): AgentSession => ({ terminate: () => undefined });
const hello = (id: string, name: string) => create(AgentHelloSchema, { agentId: id, name, hostname: "h", agentVersion: "t", protocolVersion: 2, heartbeatIntervalMs: 1000 });
const report = (serial: string, physicalId: string): DeviceReport => create(DeviceReportSchema, { serial, state: "device", properties: { model: "Pixel 7", physicalId, identityStatus: "ok" } });

/** A real store whose writes can be held back or made to fail, one method at a time. */
function controlled(inner: RegistryStore) {
  const held: (() => void)[] = [];
  const control = { hold: false, fail: new Set<keyof RegistryStore>() };
  const gate = async <T>(method: keyof RegistryStore, write: () => Promise<T>): Promise<T> => {
    if (control.hold) await new Promise<void>((resolve) => held.push(resolve));
    if (control.fail.has(method)) throw new Error(`${method} refused by test`);
    return write();
  };
  const store: RegistryStore = {
    load: () => inner.load(),
    loadAgent: (agentId, keys) => inner.loadAgent(agentId, keys),
    saveAgent: (row) => gate("saveAgent", () => inner.saveAgent(row)),
    saveHeartbeats: (rows) => gate("saveHeartbeats", () => inner.saveHeartbeats(rows)),
    replaceDevices: (agentId, rows, claims) => gate("replaceDevices", () => inner.replaceDevices(agentId, rows, claims)),
    saveDevice: (row, claims) => gate("saveDevice", () => inner.saveDevice(row, claims)),
    deleteDevice: (agentId, serial) => gate("deleteDevice", () => inner.deleteDevice(agentId, serial)),
    saveClaimDecisions: (rows) => gate("saveClaimDecisions", () => inner.saveClaimDecisions(rows)),
    deleteAgent: (agentId) => gate("deleteAgent", () => inner.deleteAgent(agentId)),
  };
  return { store, control, release: () => held.splice(0).forEach((r) => r()) };
}

let now = 1_700_000_000_000;

async function setup() {
  database = sqliteDatabase(":memory:");
  const c = controlled(createRegistryStore(database));
  const registry = await Registry.open(c.store, { heartbeatMisses: 3, now: () => now });
  return { ...c, registry };
}

const stored = async () => createRegistryStore(database as FarmDatabase).load();

/** Lets pending promise callbacks run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("Registry writes", () => {
  it("shows a change only once it is stored, and answers only then", async () => {
    const { registry, control, release } = await setup();
    await registry.attach(hello("a", "lab-a"), session());
    control.hold = true;
    let done = false;
    const pending = registry.replaceInventory("a", [report("S-1", "pid-1")]).then(() => (done = true));
    await settle();
    expect(done).toBe(false);
    expect(registry.listDevices()).toEqual([]);
    release();
    await pending;
    expect(registry.listDevices().map((d) => d.serial)).toEqual(["S-1"]);
  });

  it("lets only one of two agents reporting the same phone at once be its owner", async () => {
    const { registry } = await setup();
    await Promise.all([registry.attach(hello("a", "lab-a"), session()), registry.attach(hello("b", "lab-b"), session())]);
    await Promise.all([registry.replaceInventory("a", [report("USB-1", "pid-1")]), registry.upsertDevice("b", report("WIFI-1", "pid-1"))]);
    expect(registry.listDevices().map((d) => `${d.agentName}/${d.serial}/${d.state}`)).toEqual(["lab-a/USB-1/device", "lab-b/WIFI-1/quarantined"]);
    // And the store agrees: a restart shows the same.
    const restarted = await Registry.open(createRegistryStore(database as FarmDatabase), { heartbeatMisses: 3 });
    await restarted.attach(hello("b", "lab-b"), session());
    await restarted.replaceInventory("b", [report("WIFI-1", "pid-1")]);
    expect(restarted.listDevices({ agent: "lab-b" }).map((d) => d.state)).toEqual(["quarantined"]);
  });

  it("refuses a second stream for an agent whose first attach is still being stored", async () => {
    const { registry, control, release } = await setup();
    control.hold = true;
    const first = registry.attach(hello("a", "lab-a"), session());
    const second = registry.attach(hello("a", "lab-a"), session());
    await settle();
    release();
    await first;
    // Decided after the first was stored: refused without a write.
    await expect(second).rejects.toThrow(/already attached/);
  });

  it("keeps memory as it was when a write fails, claims included", async () => {
    const { registry, control } = await setup();
    const b = session();
    await registry.attach(hello("a", "lab-a"), session());
    await registry.attach(hello("b", "lab-b"), b);
    control.fail.add("replaceDevices");
    await expect(registry.replaceInventory("a", [report("USB-1", "pid-1")])).rejects.toThrow(/refused by test/);
    expect(registry.listDevices()).toEqual([]);
    // lab-a's claim on pid-1 was never stored, so it is not held against lab-b.
    await registry.upsertDevice("b", report("WIFI-1", "pid-1"));
    expect(registry.listDevices().map((d) => `${d.agentName}/${d.serial}/${d.state}`)).toEqual(["lab-b/WIFI-1/device"]);

    control.fail.clear();
    await registry.replaceInventory("a", [report("USB-1", "pid-1")]);
    control.fail.add("saveClaimDecisions");
    await expect(registry.decideAlias("USB-1", "lab-a", "accepted", "admin")).rejects.toThrow(/refused by test/);
    expect(registry.listDevices({ agent: "lab-a" }).map((d) => d.state)).toEqual(["quarantined"]);
    control.fail.clear();
    expect((await registry.decideAlias("USB-1", "lab-a", "accepted", "admin")).state).toBe("device");

    await registry.detach("b", b);
    control.fail.add("deleteAgent");
    await expect(registry.removeAgent("lab-b")).rejects.toThrow(/refused by test/);
    expect(registry.listDevices({ agent: "lab-b" }).map((d) => d.serial)).toEqual(["WIFI-1"]);
    expect((await stored()).agents.map((a) => a.id).sort()).toEqual(["a", "b"]);
  });

  it("writes heartbeat times it could not write with the next flush", async () => {
    const { registry, control } = await setup();
    await registry.attach(hello("a", "lab-a"), session());
    now += 1_000;
    registry.heartbeat("a");
    control.fail.add("saveHeartbeats");
    await expect(registry.flushHeartbeats()).rejects.toThrow(/refused by test/);
    expect((await stored()).agents[0]?.lastHeartbeatAt).toBe(now - 1_000);
    control.fail.clear();
    await registry.flushHeartbeats();
    expect((await stored()).agents[0]?.lastHeartbeatAt).toBe(now);
  });
});
