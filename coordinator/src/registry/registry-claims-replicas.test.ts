import { afterEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { AgentHelloSchema, DeviceReportSchema, type DeviceReport } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { Registry, type AgentSession } from "./registry.js";
import { createRegistryStore } from "../db/stores.js";

let opened: FarmDatabase | undefined;
afterEach(async () => {
  await opened?.close();
  opened = undefined;
});

const session = (): AgentSession => ({ terminate: () => undefined });
const hello = (id: string, name: string) => create(AgentHelloSchema, { agentId: id, name, hostname: "h", agentVersion: "t", protocolVersion: 2, heartbeatIntervalMs: 1000 });
const report = (serial: string, physicalId: string): DeviceReport => create(DeviceReportSchema, { serial, state: "device", properties: { model: "Pixel 7", apiLevel: 34, serialno: "SN", physicalId, identityStatus: "ok" } });

describe.each(dialects)("device claims made through two replicas at once (%s)", (dialect) => {
  it("gives a physical id one owner in the database; the replica that had not heard stores its agent's claim pending and quarantines the phone", async () => {
    opened = await openTestDatabase(dialect);
    // Two replicas, each with its own memory of the claims, opened before either agent reported.
    const one = await Registry.open(createRegistryStore(opened), { heartbeatMisses: 3 });
    const two = await Registry.open(createRegistryStore(opened), { heartbeatMisses: 3 });
    await one.attach(hello("a", "lab-a"), session());
    await two.attach(hello("b", "lab-b"), session());
    await one.replaceInventory("a", [report("USB-1", "pid-1")]);
    // Replica two has not re-read anything: by its memory, nobody owns pid-1.
    await two.upsertDevice("b", report("FAKE-1", "pid-1"));
    const claimed = two.listDevices({ agent: "b" }).find((d) => d.serial === "FAKE-1");
    expect(claimed?.state).toBe("quarantined");
    expect(claimed?.quarantineReason).toContain("physical id pid-1");
    expect(one.listDevices({ agent: "a" }).find((d) => d.serial === "USB-1")?.state).toBe("device");
    // A full inventory from the other side is refused ownership the same way.
    await two.attach(hello("c", "lab-c"), session());
    await two.replaceInventory("c", [report("FAKE-2", "pid-1")]);
    expect(two.listDevices({ agent: "c" }).find((d) => d.serial === "FAKE-2")?.state).toBe("quarantined");
    // What is stored: one owner, the others pending; a restart (a fresh read) agrees.
    const stored = (await createRegistryStore(opened).load()).claims.filter((c) => c.key === "physical:pid-1");
    expect(stored.map((c) => [c.agentId, c.status]).sort()).toEqual([["a", "owner"], ["b", "pending"], ["c", "pending"]]);
    const again = await Registry.open(createRegistryStore(opened), { heartbeatMisses: 3 });
    await again.attach(hello("b", "lab-b"), session());
    await again.replaceInventory("b", [report("FAKE-1", "pid-1")]);
    expect(again.listDevices({ agent: "b" })[0]?.quarantineReason).toContain("lab-a");
  });
});
