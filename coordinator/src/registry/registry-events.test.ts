import { afterEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { AgentHelloSchema, DeviceReportSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { HEARTBEAT_EVENT_MS } from "./liveness.js";
import { AGENT_OFFLINE, Registry } from "./registry.js";
import { SqliteRegistryStore } from "./sqlite-registry-store.js";

let now = 1_700_000_000_000;
const clock = () => now;

let opened: OpenedDatabase | undefined;

afterEach(() => {
  opened?.close();
  opened = undefined;
});

const hello = create(AgentHelloSchema, { agentId: "a-1", name: "lab-1", hostname: "h", agentVersion: "t", protocolVersion: 2, heartbeatIntervalMs: 1000 });
const report = (serial: string) => create(DeviceReportSchema, { serial, state: "device", properties: { physicalId: `pd-${serial}`, identityStatus: "ok", model: "Pixel 7" } });

function registry(): Promise<Registry> {
  opened = openDatabase(":memory:");
  return Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 3, now: clock });
}

/** Every event the registry emits, in order, as short strings. */
function record(r: Registry): string[] {
  const log: string[] = [];
  r.events.on("change", () => log.push("change"));
  r.events.on("agent", (a) => log.push(`agent ${a.name} ${a.online ? "online" : "offline"} ${a.deviceCount}`));
  r.events.on("device", (d) => log.push(`device ${d.serial} ${d.state}`));
  r.events.on("deviceRemoved", (agentId, serial) => log.push(`removed ${agentId}/${serial}`));
  return log;
}

describe("Registry events", () => {
  it("tells every subscriber what changed, in order", async () => {
    const r = await registry();
    const first = record(r);
    const second = record(r);
    const session = { terminate: () => undefined };
    await r.attach(hello, session);
    await r.replaceInventory("a-1", [report("S-1"), report("S-2")]);
    await r.replaceInventory("a-1", [report("S-2")]);
    await r.upsertDevice("a-1", report("S-3"));
    await r.removeDevice("a-1", "S-3");
    await r.detach("a-1", session);
    const expected = [
      "change",
      "agent lab-1 online 0",
      "change",
      "agent lab-1 online 2",
      "device S-1 device",
      "device S-2 device",
      "change",
      "removed a-1/S-1",
      "agent lab-1 online 1",
      "device S-2 device",
      "change",
      "device S-3 device",
      // Removing a device frees nothing: no change for the lease manager.
      "removed a-1/S-3",
      "agent lab-1 online 1",
      "change",
      "agent lab-1 offline 1",
      `device S-2 ${AGENT_OFFLINE}`,
    ];
    expect(first).toEqual(expected);
    expect(second).toEqual(expected);
  });

  it("re-announces an agent for its heartbeats at most every HEARTBEAT_EVENT_MS", async () => {
    const r = await registry();
    const seen: number[] = [];
    r.events.on("agent", (a) => seen.push(Number(a.lastHeartbeatTime?.seconds ?? 0n)));
    await r.attach(hello, { terminate: () => undefined });
    const attachedAt = now;
    expect(seen).toEqual([Math.floor(attachedAt / 1000)]);
    seen.length = 0;
    now += HEARTBEAT_EVENT_MS - 1;
    r.heartbeat("a-1");
    expect(seen).toEqual([]);
    now += 1;
    r.heartbeat("a-1");
    expect(seen).toEqual([Math.floor((attachedAt + HEARTBEAT_EVENT_MS) / 1000)]);
    now += 1_000;
    r.heartbeat("a-1");
    expect(seen).toHaveLength(1);
  });

  it("tells of every device of a removed agent", async () => {
    const r = await registry();
    const session = { terminate: () => undefined };
    await r.attach(hello, session);
    await r.replaceInventory("a-1", [report("S-1"), report("S-2")]);
    await r.detach("a-1", session);
    const log = record(r);
    await r.removeAgent("lab-1");
    expect(log).toEqual(["change", "removed a-1/S-1", "removed a-1/S-2"]);
  });
});
