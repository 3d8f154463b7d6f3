import { afterEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { AgentHelloSchema, DeviceReportSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { DevicePropertiesSchema } from "@farm/shared/gen/farm/v1/registry_pb";
import type { FarmDatabase } from "../db/database.js";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { AGENT_OFFLINE, Registry } from "./registry.js";
import { SqliteRegistryStore } from "./sqlite-registry-store.js";
import { createRegistryStore } from "../db/stores.js";

let opened: OpenedDatabase | undefined;
let database: FarmDatabase | undefined;

afterEach(async () => {
  opened?.close();
  opened = undefined;
  await database?.close();
  database = undefined;
});

const hello = create(AgentHelloSchema, { agentId: "a-1", name: "lab-1", hostname: "h", agentVersion: "t", protocolVersion: 2, heartbeatIntervalMs: 1000 });

describe.each(dialects)("Registry persistence on %s", (dialect) => {
  it("gives a new registry on the same database every property of every device", async () => {
    database = await openTestDatabase(dialect);
    const first = await Registry.open(createRegistryStore(database), { heartbeatMisses: 3 });
    const iphone = create(DevicePropertiesSchema, {
      model: "iPhone 15",
      manufacturer: "Apple",
      androidVersion: "17.2",
      serialno: "00008110-00AA",
      bootId: "",
      physicalId: "ios-00008110-00AA",
      identityStatus: "ok",
      pinLabel: "",
      platform: "ios",
    });
    const pinned = create(DevicePropertiesSchema, {
      model: "Pixel 7",
      manufacturer: "Google",
      apiLevel: 34,
      androidVersion: "14",
      abi: "arm64-v8a",
      serialno: "0000",
      bootId: "b-1",
      physicalId: "android-pinned",
      identityStatus: "duplicate",
      pinLabel: "left-bench",
      platform: "android",
    });
    await first.attach(hello, { terminate: () => undefined });
    await first.replaceInventory("a-1", [create(DeviceReportSchema, { serial: "IOS-1", state: "device", properties: iphone })]);
    await first.upsertDevice("a-1", create(DeviceReportSchema, { serial: "0000-a", state: "device", properties: pinned }));

    // What a restarted coordinator reads back, before the agent attaches again.
    const second = await Registry.open(createRegistryStore(database), { heartbeatMisses: 3 });
    const listed = second.listDevices();
    expect(listed.map((d) => [d.serial, d.state])).toEqual([
      ["0000-a", AGENT_OFFLINE],
      ["IOS-1", AGENT_OFFLINE],
    ]);
    expect(listed.find((d) => d.serial === "IOS-1")?.properties).toEqual(iphone);
    expect(listed.find((d) => d.serial === "0000-a")?.properties).toEqual(pinned);
    expect(second.physicalIdOf("0000-a")).toBe("android-pinned");
  });
});

describe("Registry persistence on sqlite", () => {
  it("still reads rows written with the older, partial property set", async () => {
    opened = openDatabase(":memory:");
    await (await Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 3 })).attach(hello, { terminate: () => undefined });
    opened.sqlite
      .prepare("INSERT INTO devices (agent_id, serial, state, properties, updated_at) VALUES (?, ?, ?, ?, ?)")
      .run("a-1", "OLD-1", "device", JSON.stringify({ model: "Pixel 6", manufacturer: "Google", apiLevel: 33, androidVersion: "13", abi: "arm64-v8a", serialno: "S1", bootId: "b" }), 1);
    const listed = (await Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 3 })).listDevices();
    expect(listed[0]?.properties).toMatchObject({ model: "Pixel 6", apiLevel: 33, serialno: "S1", physicalId: "" });
  });
});
