import { afterEach, describe, expect, it } from "vitest";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import type { AgentRow, ClaimRow, DeviceRow } from "./registry-store.js";
import { SqliteRegistryStore } from "./sqlite-registry-store.js";

let opened: OpenedDatabase | undefined;

afterEach(() => {
  opened?.close();
  opened = undefined;
});

const agent: AgentRow = { id: "a-1", name: "lab-1", hostname: "h", agentVersion: "t", protocolVersion: 2, adbVersion: "41", heartbeatIntervalMs: 1000, connectedAt: 10, lastHeartbeatAt: 20 };
const device = (serial: string, physicalId = `pd-${serial}`): DeviceRow => ({ agentId: "a-1", serial, state: "device", properties: { model: "Pixel 7", apiLevel: 34, physicalId }, updatedAt: 30 });
const claim = (key: string): ClaimRow => ({ key, agentId: "a-1", status: "owner", createdAt: 30, decidedBy: null, decidedAt: null });

function store(): SqliteRegistryStore {
  opened = openDatabase(":memory:");
  return new SqliteRegistryStore(opened.db);
}

describe("SqliteRegistryStore", () => {
  it("reads back what it wrote, with device properties stored as JSON text", () => {
    const s = store();
    s.saveAgent(agent);
    s.replaceDevices("a-1", [device("S-1"), device("S-2")], [claim("serial:S-1"), claim("physical:pd-S-1")]);
    s.saveDevice({ ...device("S-2"), state: "offline" }, []);
    s.saveHeartbeats([{ agentId: "a-1", lastHeartbeatAt: 99 }]);
    const loaded = s.load();
    expect(loaded.agents).toEqual([{ ...agent, lastHeartbeatAt: 99 }]);
    expect(loaded.devices).toEqual([device("S-1"), { ...device("S-2"), state: "offline" }]);
    expect(loaded.claims.map((c) => c.key).sort()).toEqual(["physical:pd-S-1", "serial:S-1"]);
    // The column holds the same JSON text as before the column was typed: no migration, older rows read as they are.
    const raw = opened?.sqlite.prepare("SELECT properties FROM devices WHERE serial = 'S-1'").get() as { properties: unknown };
    expect(typeof raw.properties).toBe("string");
    expect(JSON.parse(raw.properties as string)).toEqual(device("S-1").properties);
  });

  it("commits a new inventory and the claims it makes together, or neither", () => {
    const s = store();
    s.saveAgent(agent);
    s.replaceDevices("a-1", [device("S-1")], [claim("serial:S-1")]);
    opened?.sqlite.exec("CREATE TRIGGER refuse_s2 BEFORE INSERT ON devices WHEN NEW.serial = 'S-2' BEGIN SELECT RAISE(ABORT, 'refused by test'); END");
    expect(() => s.replaceDevices("a-1", [device("S-1"), device("S-2")], [claim("serial:S-2")])).toThrow(/refused by test/);
    expect(() => s.saveDevice(device("S-2"), [claim("physical:pd-S-2")])).toThrow(/refused by test/);
    const loaded = s.load();
    expect(loaded.devices.map((d) => d.serial)).toEqual(["S-1"]);
    expect(loaded.claims.map((c) => c.key)).toEqual(["serial:S-1"]);
  });

  it("keeps a claim's decision when the claim is made again, and forgets an agent with its devices and claims", () => {
    const s = store();
    s.saveAgent(agent);
    s.replaceDevices("a-1", [device("S-1")], [{ ...claim("serial:S-1"), status: "pending" }]);
    s.saveClaimDecisions([{ ...claim("serial:S-1"), status: "accepted", decidedBy: "admin", decidedAt: 40 }]);
    s.replaceDevices("a-1", [device("S-1")], [claim("serial:S-1")]);
    expect(s.load().claims).toEqual([{ ...claim("serial:S-1"), status: "accepted", decidedBy: "admin", decidedAt: 40 }]);

    s.deleteAgent("a-1");
    expect(s.load()).toEqual({ agents: [], devices: [], claims: [] });
  });
});
