import { afterEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { ConnectError } from "@connectrpc/connect";
import { AgentHelloSchema, DeviceReportSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { DevicePropertiesSchema, type Device } from "@farm/shared/gen/farm/v1/registry_pb";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { AGENT_OFFLINE, Registry } from "./registry.js";
import { SqliteRegistryStore } from "./sqlite-registry-store.js";

// A fake clock: heartbeats are missed because a test moves time, not because it sleeps.
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

const hello = create(AgentHelloSchema, { agentId: "a-1", name: "lab-1", hostname: "h", agentVersion: "t", protocolVersion: 2, adbVersion: "41", heartbeatIntervalMs: 1000 });

const pixel = create(DevicePropertiesSchema, {
  model: "Pixel 7",
  manufacturer: "Google",
  apiLevel: 34,
  androidVersion: "14",
  abi: "arm64-v8a",
  serialno: "P7-1",
  bootId: "b-1",
  physicalId: "android-p7-1",
  identityStatus: "ok",
  pinLabel: "",
  platform: "android",
  unresolvedActionIds: ["act-1"],
});
const iphone = create(DevicePropertiesSchema, {
  model: "iPhone 15",
  manufacturer: "Apple",
  androidVersion: "17.2",
  serialno: "00008110-00AA",
  physicalId: "ios-00008110-00AA",
  identityStatus: "ok",
  platform: "ios",
});

/** What a device is, apart from how it is shown now. */
const identity = (d: Device) => ({ serial: d.serial, agentId: d.agentId, agentName: d.agentName, properties: d.properties, updateTime: d.updateTime, quarantineReason: d.quarantineReason });

describe("Registry: devices of an offline agent", () => {
  it("lists them agent-offline with every property when heartbeats stop, and again after a restart", async () => {
    opened = openDatabase(":memory:");
    const terminated: Error[] = [];
    const first = await Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 3, now: clock });
    await first.attach(hello, { terminate: (e) => terminated.push(e) });
    await first.replaceInventory("a-1", [
      create(DeviceReportSchema, { serial: "P7-1", state: "device", properties: pixel }),
      create(DeviceReportSchema, { serial: "IOS-1", state: "device", properties: iphone }),
    ]);
    const online = first.listDevices();
    expect(online.map((d) => [d.serial, d.state])).toEqual([["IOS-1", "device"], ["P7-1", "device"]]);
    expect(first.candidates().map((c) => c.serial)).toEqual(["IOS-1", "P7-1"]);

    now += 2_000;
    first.heartbeat("a-1");
    const lastHeartbeat = now;
    // Three missed 1 s intervals: at exactly the deadline the agent still counts.
    now += 3_000;
    expect(await first.sweep()).toEqual([]);
    now += 1;
    expect(await first.sweep()).toEqual(["a-1"]);
    expect(codeOf(terminated[0])).toBe("AGENT_HEARTBEAT_MISSED");

    const offline = first.listDevices();
    expect(offline.map((d) => [d.serial, d.state])).toEqual([["IOS-1", AGENT_OFFLINE], ["P7-1", AGENT_OFFLINE]]);
    expect(offline.map(identity)).toEqual(online.map(identity));
    expect(first.candidates()).toEqual([]);
    expect(() => first.route("P7-1")).toThrow(expect.toSatisfy((e) => codeOf(e) === "DEVICE_OFFLINE"));

    // A restarted coordinator, before the agent comes back.
    now += 60_000;
    const second = await Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 3, now: clock });
    const restored = second.listDevices();
    expect(restored.map((d) => [d.serial, d.state])).toEqual([["IOS-1", AGENT_OFFLINE], ["P7-1", AGENT_OFFLINE]]);
    expect(restored.map(identity)).toEqual(online.map(identity));
    expect(second.listDevices({ state: AGENT_OFFLINE })).toHaveLength(2);
    expect(second.listDevices({ state: "device" })).toEqual([]);
    expect(second.listAgents()).toEqual([
      expect.objectContaining({ id: "a-1", name: "lab-1", online: false, deviceCount: 2, adbVersion: "41", lastHeartbeatTime: timestampFromMs(lastHeartbeat) }),
    ]);
    expect(second.candidates()).toEqual([]);
    expect(() => second.route("IOS-1")).toThrow(expect.toSatisfy((e) => codeOf(e) === "DEVICE_OFFLINE"));
    // What the devices said still counts while their agent is away.
    expect(second.physicalIdOf("P7-1")).toBe("android-p7-1");
    expect(second.unresolvedOn("android-p7-1")).toEqual([{ agentId: "a-1", agentName: "lab-1", actionIds: ["act-1"] }]);

    // The agent re-attaches: until it reports, what it said before is not what it says now (a restarted
    // agent may not have its phones again yet); with its inventory, the devices are online again.
    await second.attach(hello, { terminate: () => undefined });
    expect(second.listDevices().map((d) => [d.serial, d.state])).toEqual([["IOS-1", AGENT_OFFLINE], ["P7-1", AGENT_OFFLINE]]);
    expect(second.candidates()).toEqual([]);
    await second.replaceInventory("a-1", [
      create(DeviceReportSchema, { serial: "P7-1", state: "device", properties: pixel }),
      create(DeviceReportSchema, { serial: "IOS-1", state: "device", properties: iphone }),
    ]);
    expect(second.listDevices().map((d) => [d.serial, d.state])).toEqual([["IOS-1", "device"], ["P7-1", "device"]]);
    expect(second.candidates().map((c) => c.serial)).toEqual(["IOS-1", "P7-1"]);
  });

  it("lists them agent-offline after a restart that followed a clean detach", async () => {
    opened = openDatabase(":memory:");
    const first = await Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 3, now: clock });
    const session = { terminate: () => undefined };
    await first.attach(hello, session);
    await first.upsertDevice("a-1", create(DeviceReportSchema, { serial: "P7-1", state: "unauthorized", properties: pixel }));
    await first.detach("a-1", session, "token revoked");
    expect(first.listAgents()[0]).toMatchObject({ online: false, offlineReason: "token revoked" });

    const second = await Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 3, now: clock });
    const [d] = second.listDevices();
    expect(d?.state).toBe(AGENT_OFFLINE);
    expect(d?.properties).toEqual(pixel);
    expect(d?.updateTime).toEqual(timestampFromMs(now));
  });
});
