import { afterEach, describe, expect, it } from "vitest";
import { fromBinary } from "@bufbuild/protobuf";
import { DeviceSchema } from "@farm/shared/gen/farm/v1/registry_pb";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { Registry } from "./registry.js";
import { SqliteRegistryStore } from "./sqlite-registry-store.js";
import { bareReport, phoneReport as report, testHello as hello, testSession as session } from "./testing/registry-fixtures.js";

let opened: OpenedDatabase | undefined;

afterEach(() => {
  opened?.close();
  opened = undefined;
});

const attached = session();

async function registry(): Promise<Registry> {
  opened ??= openDatabase(":memory:");
  const r = await Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 3 });
  await r.attach(hello("a", "lab-a"), attached);
  // One phone on two serials (USB and TCP), and another phone.
  await r.replaceInventory("a", [report("USB-1", "pid-1"), report("10.0.0.7:5555", "pid-1"), report("USB-2", "pid-2")]);
  return r;
}

describe("phones held out of the pool by their cleanup", () => {
  it("are not lease candidates under any serial, and are listed with their state and reason", async () => {
    const r = await registry();
    let changes = 0;
    r.events.on("change", () => changes++);
    r.setHold("pid-1", { state: "cleaning", reason: "" });
    expect(changes).toBe(1);
    expect(r.candidates().map((c) => c.serial)).toEqual(["USB-2"]);
    expect(r.listDevices({ state: "cleaning" }).map((d) => d.serial).sort()).toEqual(["10.0.0.7:5555", "USB-1"]);

    r.setHold("pid-1", { state: "needs-attention", reason: "uninstall com.x failed" });
    const listed = r.listDevices({}).find((d) => d.serial === "USB-1");
    expect(listed).toMatchObject({ state: "needs-attention", attentionReason: "uninstall com.x failed" });
    // The pre-encoded listing (binary clients) follows the change too.
    const encoded = r.listDevicesEncoded({}, { pageSize: 10, pageToken: "" }).items.map((b) => fromBinary(DeviceSchema, b));
    expect(encoded.find((d) => d.serial === "USB-1")).toMatchObject({ state: "needs-attention", attentionReason: "uninstall com.x failed" });
    expect(r.holdOf("pid-1")?.state).toBe("needs-attention");

    r.setHold("pid-1", undefined);
    expect(r.candidates().map((c) => c.serial).sort()).toEqual(["10.0.0.7:5555", "USB-1", "USB-2"]);
    expect(r.listDevices({}).find((d) => d.serial === "USB-1")).toMatchObject({ state: "device", attentionReason: "" });
    // The same hold twice is no change.
    r.setHold("pid-2", { state: "cleaning", reason: "" });
    const before = changes;
    r.setHold("pid-2", { state: "cleaning", reason: "" });
    expect(changes).toBe(before);
  });

  it("shows needs-attention even while the agent is offline: an admin has to act either way", async () => {
    const r = await registry();
    r.setHold("pid-2", { state: "needs-attention", reason: "timed out" });
    r.setHold("pid-1", { state: "cleaning", reason: "" });
    await r.detach("a", attached);
    const listed = r.listDevices({});
    expect(listed.find((d) => d.serial === "USB-2")?.state).toBe("needs-attention");
    expect(listed.find((d) => d.serial === "USB-1")?.state).toBe("agent-offline");
  });

  it("lists a phone identity-pending after a restart until its agent has read its identity, never plainly device", async () => {
    const r = await registry();
    r.setHold("pid-1", { state: "needs-attention", reason: "uninstall com.x failed" });
    await r.detach("a", attached);
    // A restarted coordinator: the cleanups put the mark back (by physical id) before the agent attaches again.
    const again = await Registry.open(new SqliteRegistryStore((opened as OpenedDatabase).db), { heartbeatMisses: 3 });
    again.setHold("pid-1", { state: "needs-attention", reason: "uninstall com.x failed" });
    const back = session();
    await again.attach(hello("a", "lab-a"), back);
    // The restarted agent lists its phones before it has read who they are (adb state only).
    await again.replaceInventory("a", [bareReport("USB-1"), bareReport("10.0.0.7:5555"), bareReport("USB-2")]);
    const listed = () => Object.fromEntries(again.listDevices({}).map((d) => [d.serial, d.state]));
    expect(listed()).toEqual({ "USB-1": "identity-pending", "10.0.0.7:5555": "identity-pending", "USB-2": "identity-pending" });
    // The encoded listing (binary clients) says the same.
    const encoded = again.listDevicesEncoded({}, { pageSize: 10, pageToken: "" }).items.map((b) => fromBinary(DeviceSchema, b));
    expect(encoded.map((d) => d.state)).toEqual(["identity-pending", "identity-pending", "identity-pending"]);
    expect(again.listDevices({ state: "device" })).toEqual([]);
    expect(again.candidates()).toEqual([]);

    // Identities read: the marked phone shows its mark under both serials, the other one is usable.
    await again.upsertDevice("a", report("USB-1", "pid-1"));
    await again.upsertDevice("a", report("USB-2", "pid-2"));
    expect(listed()).toEqual({ "USB-1": "needs-attention", "10.0.0.7:5555": "identity-pending", "USB-2": "device" });
    expect(again.listDevices({}).find((d) => d.serial === "USB-1")?.attentionReason).toBe("uninstall com.x failed");
    await again.upsertDevice("a", report("10.0.0.7:5555", "pid-1"));
    expect(listed()["10.0.0.7:5555"]).toBe("needs-attention");
    expect(again.candidates().map((c) => c.serial)).toEqual(["USB-2"]);
  });

  it("keeps adb's own state for a phone whose identity is not read: offline and unauthorized say more than identity-pending", async () => {
    const r = await registry();
    await r.replaceInventory("a", [bareReport("USB-3", "unauthorized"), bareReport("USB-4", "offline")]);
    expect(r.listDevices({}).map((d) => d.state)).toEqual(["unauthorized", "offline"]);
  });
});
