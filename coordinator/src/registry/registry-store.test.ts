import { afterEach, describe, expect, it } from "vitest";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { type AgentRow, type ClaimRow, type DeviceRow, type RegistryStore } from "./registry-store.js";
import { createRegistryStore } from "../db/stores.js";

let opened: FarmDatabase | undefined;

afterEach(async () => {
  await opened?.close();
  opened = undefined;
});

const agent: AgentRow = { id: "a-1", name: "lab-1", hostname: "h", agentVersion: "t", protocolVersion: 2, adbVersion: "41", heartbeatIntervalMs: 1000, connectedAt: 10, lastHeartbeatAt: 20 };
const other: AgentRow = { ...agent, id: "a-2", name: "lab-2", lastHeartbeatAt: null };
const device = (serial: string, physicalId = `pd-${serial}`): DeviceRow => ({ agentId: "a-1", serial, state: "device", properties: { model: "Pixel 7", apiLevel: 34, physicalId }, updatedAt: 30 });
const claim = (key: string): ClaimRow => ({ key, agentId: "a-1", status: "owner", createdAt: 30, decidedBy: null, decidedAt: null });
const bySerial = (a: DeviceRow, b: DeviceRow) => (a.serial < b.serial ? -1 : a.serial > b.serial ? 1 : 0);

/** Makes the database refuse to store a device with serial S-2, the way a failing write would. */
async function refuseS2(db: FarmDatabase): Promise<void> {
  if (db.dialect === "sqlite") {
    db.sqlite.exec("CREATE TRIGGER refuse_s2 BEFORE INSERT ON devices WHEN NEW.serial = 'S-2' BEGIN SELECT RAISE(ABORT, 'refused by test'); END");
    return;
  }
  await db.pool.query(`
    CREATE FUNCTION refuse_s2() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.serial = 'S-2' THEN RAISE EXCEPTION 'refused by test'; END IF; RETURN NEW; END $$;
    CREATE TRIGGER refuse_s2 BEFORE INSERT ON devices FOR EACH ROW EXECUTE FUNCTION refuse_s2();`);
}

/** The message of a rejection, or of its cause (drizzle wraps the driver's error). */
async function failure(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    const e = err as Error & { cause?: Error };
    return `${e.message} ${e.cause?.message ?? ""}`;
  }
  throw new Error("expected the write to fail");
}

describe.each(dialects)("RegistryStore on %s", (dialect) => {
  async function store(): Promise<RegistryStore> {
    opened = await openTestDatabase(dialect);
    return createRegistryStore(opened);
  }

  it("reads back what it wrote, with device properties stored as JSON", async () => {
    const s = await store();
    await s.saveAgent(agent);
    await s.saveAgent(other);
    await s.replaceDevices("a-1", [device("S-1"), device("S-2")], [claim("serial:S-1"), claim("physical:pd-S-1")]);
    await s.saveDevice({ ...device("S-2"), state: "offline" }, []);
    await s.saveHeartbeats([{ agentId: "a-1", lastHeartbeatAt: 99 }, { agentId: "a-2", lastHeartbeatAt: 1_700_000_000_000 }, { agentId: "gone", lastHeartbeatAt: 5 }]);
    await s.saveAgent({ ...agent, name: "lab-1-renamed", lastHeartbeatAt: 99 });
    const loaded = await s.load();
    expect(loaded.agents.sort((a, b) => a.id.localeCompare(b.id))).toEqual([{ ...agent, name: "lab-1-renamed", lastHeartbeatAt: 99 }, { ...other, lastHeartbeatAt: 1_700_000_000_000 }]);
    expect(loaded.devices.sort(bySerial)).toEqual([device("S-1"), { ...device("S-2"), state: "offline" }]);
    expect(loaded.claims.map((c) => c.key).sort()).toEqual(["physical:pd-S-1", "serial:S-1"]);
    if (opened?.dialect === "sqlite") {
      // The column holds the same JSON text as before the column was typed: no migration, older rows read as they are.
      const raw = opened.sqlite.prepare("SELECT properties FROM devices WHERE serial = 'S-1'").get() as { properties: unknown };
      expect(typeof raw.properties).toBe("string");
      expect(JSON.parse(raw.properties as string)).toEqual(device("S-1").properties);
    } else if (opened?.dialect === "postgres") {
      const raw = await opened.pool.query<{ kind: string }>("SELECT jsonb_typeof(properties) AS kind FROM devices WHERE serial = 'S-1'");
      expect(raw.rows[0]?.kind).toBe("object");
    }
  });

  it("replaces an agent's devices with an empty inventory, and deletes one device", async () => {
    const s = await store();
    await s.saveAgent(agent);
    await s.replaceDevices("a-1", [device("S-1"), device("S-2")], []);
    await s.deleteDevice("a-1", "S-1");
    expect((await s.load()).devices).toEqual([device("S-2")]);
    await s.replaceDevices("a-1", [], []);
    expect((await s.load()).devices).toEqual([]);
    // Nothing to write is no write at all.
    await s.saveHeartbeats([]);
    await s.saveClaimDecisions([]);
  });

  it("commits a new inventory and the claims it makes together, or neither", async () => {
    const s = await store();
    await s.saveAgent(agent);
    await s.replaceDevices("a-1", [device("S-1")], [claim("serial:S-1")]);
    await refuseS2(opened as FarmDatabase);
    expect(await failure(s.replaceDevices("a-1", [device("S-1"), device("S-2")], [claim("serial:S-2")]))).toMatch(/refused by test/);
    expect(await failure(s.saveDevice(device("S-2"), [claim("physical:pd-S-2")]))).toMatch(/refused by test/);
    const loaded = await s.load();
    expect(loaded.devices.map((d) => d.serial)).toEqual(["S-1"]);
    expect(loaded.claims.map((c) => c.key)).toEqual(["serial:S-1"]);
  });

  it("keeps a claim's decision when the claim is made again, and forgets an agent with its devices and claims", async () => {
    const s = await store();
    await s.saveAgent(agent);
    await s.replaceDevices("a-1", [device("S-1")], [{ ...claim("serial:S-1"), status: "pending" }]);
    await s.saveClaimDecisions([{ ...claim("serial:S-1"), status: "accepted", decidedBy: "admin", decidedAt: 40 }]);
    await s.replaceDevices("a-1", [device("S-1")], [claim("serial:S-1")]);
    await s.saveDevice(device("S-1"), [claim("serial:S-1")]);
    expect((await s.load()).claims).toEqual([{ ...claim("serial:S-1"), status: "accepted", decidedBy: "admin", decidedAt: 40 }]);

    await s.deleteAgent("a-1");
    expect(await s.load()).toEqual({ agents: [], devices: [], claims: [] });
  });
});
