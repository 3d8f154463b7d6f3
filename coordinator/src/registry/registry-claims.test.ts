import { afterEach, describe, expect, it } from "vitest";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { Registry } from "./registry.js";
import { SqliteRegistryStore } from "./sqlite-registry-store.js";
import { bareReport, failure, phoneReport as report, refusal, testHello as hello, testSession as session } from "./testing/registry-fixtures.js";

let opened: OpenedDatabase | undefined;

afterEach(() => {
  opened?.close();
  opened = undefined;
});

function registry(): Promise<Registry> {
  opened ??= openDatabase(":memory:");
  return Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 3 });
}

const stateOf = (r: Registry, agent: string, serial: string) => r.listDevices({ agent }).find((d) => d.serial === serial);

/** lab-a reports its phone first; lab-b then claims the same physical id under another serial. */
async function contested(): Promise<Registry> {
  const r = await registry();
  await r.attach(hello("a", "lab-a"), session());
  await r.replaceInventory("a", [report("USB-1", "pid-1")]);
  await r.attach(hello("b", "lab-b"), session());
  await r.replaceInventory("b", [report("FAKE-1", "pid-1")]);
  return r;
}

describe("what an agent may claim", () => {
  it("quarantines a physical id newly claimed by a second agent: listed, but neither leasable nor routable", async () => {
    const r = await contested();
    expect(stateOf(r, "lab-a", "USB-1")?.state).toBe("device");
    const claimed = stateOf(r, "lab-b", "FAKE-1");
    expect(claimed?.state).toBe("quarantined");
    expect(claimed?.quarantineReason).toContain("lab-a");
    expect(r.listDevices({ state: "quarantined" }).map((d) => d.serial)).toEqual(["FAKE-1"]);
    expect(r.candidates().map((c) => `${c.agentName}/${c.serial}`)).toEqual(["lab-a/USB-1"]);
    expect(failure(() => r.route("FAKE-1"))).toMatchObject({ code: "DEVICE_QUARANTINED", field: "target.serial", dispatched: false });
    expect(r.route("USB-1").agentName).toBe("lab-a");
    // A lease by serial never resolves to the claimant's identity.
    expect(r.physicalIdOf("FAKE-1")).toBeUndefined();
  });

  it("quarantines an adb serial another agent reported first, whatever physical id it claims", async () => {
    const r = await registry();
    await r.attach(hello("a", "lab-a"), session());
    await r.replaceInventory("a", [report("SERIAL-1", "pid-1")]);
    await r.attach(hello("b", "lab-b"), session());
    await r.upsertDevice("b", report("SERIAL-1", "pid-forged"));
    expect(stateOf(r, "lab-b", "SERIAL-1")?.state).toBe("quarantined");
    // The serial is not made ambiguous by the claimant: it still routes to its owner.
    expect(r.route("SERIAL-1").agentName).toBe("lab-a");
    expect(r.physicalIdOf("SERIAL-1")).toBe("pid-1");
  });

  it("does not let a quarantined claim block the owner's phone with unresolved actions", async () => {
    const r = await registry();
    await r.attach(hello("a", "lab-a"), session());
    await r.replaceInventory("a", [report("USB-1", "pid-1")]);
    await r.attach(hello("b", "lab-b"), session());
    await r.replaceInventory("b", [report("FAKE-1", "pid-1", { unresolved: ["forged-action"] })]);
    expect(r.unresolvedOn("pid-1")).toEqual([]);
  });

  it("makes an accepted alias leasable via both agents, and keeps the acceptance across a restart", async () => {
    const r = await contested();
    const accepted = await r.decideAlias("FAKE-1", "lab-b", "accepted", "admin");
    expect(accepted.state).toBe("device");
    expect(r.candidates().map((c) => `${c.agentName}/${c.serial}/${c.physicalId}`)).toEqual(["lab-a/USB-1/pid-1", "lab-b/FAKE-1/pid-1"]);
    expect(r.route("FAKE-1").agentName).toBe("lab-b");

    const restarted = await Registry.open(new SqliteRegistryStore((opened as OpenedDatabase).db), { heartbeatMisses: 3 });
    await restarted.attach(hello("b", "lab-b"), session());
    await restarted.replaceInventory("b", [report("FAKE-1", "pid-1")]);
    expect(stateOf(restarted, "lab-b", "FAKE-1")?.state).toBe("device");
  });

  it("keeps a rejected alias quarantined, also after a restart, and names the admin", async () => {
    const r = await contested();
    const rejected = await r.decideAlias("FAKE-1", "b", "rejected", "admin-alice");
    expect(rejected.state).toBe("quarantined");
    expect(rejected.quarantineReason).toContain("admin-alice");
    expect(r.candidates().map((c) => c.agentName)).toEqual(["lab-a"]);

    const restarted = await Registry.open(new SqliteRegistryStore((opened as OpenedDatabase).db), { heartbeatMisses: 3 });
    await restarted.attach(hello("b", "lab-b"), session());
    await restarted.replaceInventory("b", [report("FAKE-1", "pid-1")]);
    expect(stateOf(restarted, "lab-b", "FAKE-1")?.state).toBe("quarantined");
    expect(restarted.candidates()).toEqual([]);
  });

  it("refuses to accept an alias before the agent has read the phone's identity: it would cover the adb serial only", async () => {
    const r = await registry();
    await r.attach(hello("a", "lab-a"), session());
    await r.replaceInventory("a", [report("SHARED", "pid-shared")]);
    // A second agent on the same adb server lists the serial before it has read who the phone is.
    await r.attach(hello("b", "lab-b"), session());
    await r.replaceInventory("b", [bareReport("SHARED")]);
    expect(stateOf(r, "lab-b", "SHARED")?.state).toBe("quarantined");
    // Accepted now, its physical id (read next) would be a new claim, quarantined again: the alias would
    // look accepted and then not be (attacker-claims' "online and offline agent" flake).
    expect(await refusal(r.decideAlias("SHARED", "lab-b", "accepted", "admin"))).toMatchObject({ code: "DEVICE_IDENTITY_PENDING", field: "serial" });
    expect(stateOf(r, "lab-b", "SHARED")?.state).toBe("quarantined");

    await r.upsertDevice("b", report("SHARED", "pid-shared"));
    expect((await r.decideAlias("SHARED", "lab-b", "accepted", "admin")).state).toBe("device");
    // Both agents count: a command names one.
    expect(failure(() => r.route("SHARED"))).toMatchObject({ code: "DEVICE_AMBIGUOUS", field: "target.agent" });
    expect(r.candidates().map((c) => c.agentName)).toEqual(["lab-a", "lab-b"]);
    // A report after the acceptance does not quarantine it again.
    await r.upsertDevice("b", report("SHARED", "pid-shared"));
    expect(failure(() => r.route("SHARED"))).toMatchObject({ code: "DEVICE_AMBIGUOUS" });
  });

  it("lets an admin reject an alias whose identity is not read yet: it stays out either way", async () => {
    const r = await registry();
    await r.attach(hello("a", "lab-a"), session());
    await r.replaceInventory("a", [report("SHARED", "pid-shared")]);
    await r.attach(hello("b", "lab-b"), session());
    await r.replaceInventory("b", [bareReport("SHARED")]);
    expect((await r.decideAlias("SHARED", "lab-b", "rejected", "admin")).state).toBe("quarantined");
    await r.upsertDevice("b", report("SHARED", "pid-shared"));
    expect(stateOf(r, "lab-b", "SHARED")?.state).toBe("quarantined");
    expect(r.route("SHARED").agentName).toBe("lab-a");
  });

  it("refuses a decision on a serial the agent does not report", async () => {
    const r = await contested();
    expect(await refusal(r.decideAlias("NOPE", "lab-b", "accepted", "admin"))).toMatchObject({ code: "DEVICE_NOT_FOUND", field: "serial" });
    expect(await refusal(r.decideAlias("FAKE-1", "lab-z", "accepted", "admin"))).toMatchObject({ code: "NOT_FOUND", field: "agent" });
  });
});

describe("inventory caps", () => {
  it("refuses more than 1024 devices from one agent, and a report with an over-long field, storing nothing", async () => {
    const r = await registry();
    await r.attach(hello("a", "lab-a"), session());
    await r.replaceInventory("a", [report("KEEP-1", "pid-keep")]);
    const many = Array.from({ length: 1025 }, (_, i) => report(`S-${i}`, `pid-${i}`));
    expect(await refusal(r.replaceInventory("a", many))).toMatchObject({ code: "INVENTORY_TOO_LARGE", field: "devices" });
    expect(await refusal(r.replaceInventory("a", [report("S-1", "pid-1", { model: "x".repeat(10_000) })]))).toMatchObject({
      code: "INVENTORY_TOO_LARGE",
      field: "devices[0].properties.model",
    });
    expect(r.listDevices().map((d) => d.serial)).toEqual(["KEEP-1"]);

    await r.replaceInventory("a", many.slice(0, 1024));
    expect(await refusal(r.upsertDevice("a", report("ONE-MORE", "pid-more")))).toMatchObject({ code: "INVENTORY_TOO_LARGE", field: "devices" });
    // A change to a device it already reports is fine at the cap.
    await r.upsertDevice("a", report("S-0", "pid-0"));
    expect(r.listDevices().length).toBe(1024);
  });
});

describe("routing by serial with offline agents", () => {
  /** Two agents that both own serial SHARED (accepted before), as a phone on two hosts is. */
  async function shared(): Promise<Registry> {
    opened = openDatabase(":memory:");
    for (const [agent, status] of [["a", "owner"], ["b", "accepted"]] as const) {
      for (const key of ["serial:SHARED", "physical:pid-shared"]) {
        opened.sqlite.prepare("INSERT INTO device_claims (key, agent_id, status, created_at) VALUES (?, ?, ?, 0)").run(key, agent, status);
      }
    }
    const r = await registry();
    await r.attach(hello("a", "lab-a"), session());
    await r.replaceInventory("a", [report("SHARED", "pid-shared")]);
    return r;
  }

  it("does not count an offline agent towards DEVICE_AMBIGUOUS", async () => {
    const r = await shared();
    const b = session();
    await r.attach(hello("b", "lab-b"), b);
    await r.replaceInventory("b", [report("SHARED", "pid-shared")]);
    const both = failure(() => r.route("SHARED"));
    expect(both).toMatchObject({ code: "DEVICE_AMBIGUOUS", field: "target.agent" });
    expect(both.message).toContain("lab-a");
    expect(both.message).toContain("lab-b");

    await r.detach("b", b);
    expect(r.route("SHARED").agentName).toBe("lab-a");
    expect(failure(() => r.route("SHARED", "lab-b"))).toMatchObject({ code: "DEVICE_OFFLINE" });
  });

  it("names the offline agents when none that reports the serial is online", async () => {
    const r = await shared();
    const b = session();
    await r.attach(hello("b", "lab-b"), b);
    await r.replaceInventory("b", [report("SHARED", "pid-shared")]);
    await r.detach("b", b);
    const a = await registry();
    // A fresh registry on the same database: both agents known, neither attached.
    const offline = failure(() => a.route("SHARED"));
    expect(offline).toMatchObject({ code: "DEVICE_OFFLINE", dispatched: false });
    expect(offline.message).toContain("lab-a");
    expect(offline.message).toContain("lab-b");
  });
});

describe("removing an agent", () => {
  it("is refused while the agent is attached, then forgets it, its devices and its claims", async () => {
    const r = await contested();
    expect(await refusal(r.removeAgent("lab-a"))).toMatchObject({ code: "AGENT_STILL_ATTACHED", field: "agent" });
    expect(await refusal(r.removeAgent("nobody"))).toMatchObject({ code: "NOT_FOUND", field: "agent" });
    const a = await Registry.open(new SqliteRegistryStore((opened as OpenedDatabase).db), { heartbeatMisses: 3 });
    expect(await a.removeAgent("lab-a")).toMatchObject({ removedDevices: 1 });
    expect(a.findAgent("lab-a")).toBeUndefined();
    expect(a.listDevices().map((d) => d.agentName)).toEqual(["lab-b"]);
    // Persisted: a restart does not bring it back.
    expect((await Registry.open(new SqliteRegistryStore((opened as OpenedDatabase).db), { heartbeatMisses: 3 })).findAgent("a")).toBeUndefined();
    // Its claims are gone: a new agent reporting that phone owns it.
    await a.attach(hello("c", "lab-c"), session());
    await a.replaceInventory("c", [report("USB-9", "pid-9")]);
    expect(stateOf(a, "lab-c", "USB-9")?.state).toBe("device");
  });
});
