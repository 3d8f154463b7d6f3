import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { toErrorReport } from "@farm/shared/errors";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import type { DeviceHold } from "../registry/registry.js";
import { createDeviceCleanupStore } from "../db/stores.js";
import { DeviceCleanups, type CleanupNotice } from "./device-cleanups.js";

let opened: FarmDatabase | undefined;
let dialect: (typeof dialects)[number] = "sqlite";
let holds: Map<string, DeviceHold>;

afterEach(async () => {
  await opened?.close();
  opened = undefined;
});

/** The state on the current dialect's database; a second call reads the same database again (a restart). */
async function cleanups(active: string[] = []): Promise<DeviceCleanups> {
  opened ??= await openTestDatabase(dialect);
  holds = new Map();
  return DeviceCleanups.open(createDeviceCleanupStore(opened), new Set(active), (id, hold) => (hold ? holds.set(id, hold) : holds.delete(id)), () => 1_000);
}

const L1 = { leaseId: "l-1", physicalId: "pd-a" };
const baseline = { packages: ["com.example.kept"], paths: ["/sdcard/Download/old.txt"] };

async function refusal(p: Promise<unknown>) {
  try {
    await p;
  } catch (err) {
    return toErrorReport(err);
  }
  throw new Error("not refused");
}

describe.each(dialects)("DeviceCleanups on %s", (d) => {
  beforeEach(() => {
    dialect = d;
  });

  it("holds a phone while it is cleaned and lets it back when the cleanup succeeds", async () => {
    const c = await cleanups();
    await c.recordBaseline(L1, baseline, "");
    expect(holds.size).toBe(0);
    const begun = c.beginCleaning(L1);
    // Held at once, before the store write lands: no grant can slip in between.
    expect(holds.get("pd-a")).toEqual({ state: "cleaning", reason: "" });
    expect(begun.started).toBe(true);
    if (begun.started) await begun.stored;
    expect(c.baselineOf(L1)).toEqual({ baseline });
    await c.cleaned(L1);
    expect(holds.has("pd-a")).toBe(false);
    expect(c.rowOf("pd-a")).toBeUndefined();
    // Nothing left stored: a restart holds nothing.
    await cleanups();
    expect(holds.size).toBe(0);
  });

  it("does not clean a lease it has no baseline for (granted before the policy, or never handed out)", async () => {
    const c = await cleanups();
    expect(c.beginCleaning(L1)).toEqual({ started: false });
    await c.recordBaseline({ leaseId: "l-other", physicalId: "pd-a" }, baseline, "");
    expect(c.beginCleaning(L1)).toEqual({ started: false });
    expect(holds.size).toBe(0);
  });

  it("forgets a baseline when its lease ends with no policy in force", async () => {
    const c = await cleanups();
    await c.recordBaseline(L1, baseline, "");
    await c.forget({ leaseId: "l-other", physicalId: "pd-a" });
    expect(c.rowOf("pd-a")).toBeDefined();
    await c.forget(L1);
    expect(c.rowOf("pd-a")).toBeUndefined();
    await cleanups();
    expect(holds.size).toBe(0);
  });

  it("says why there is no baseline when it could not be read", async () => {
    const c = await cleanups();
    await c.recordBaseline(L1, undefined, "agent offline");
    expect(c.beginCleaning(L1).started).toBe(true);
    expect(c.baselineOf(L1)).toEqual({ problem: "agent offline" });
  });

  it("keeps needs-attention across a restart until an admin clears it", async () => {
    const c = await cleanups();
    await c.recordBaseline(L1, baseline, "");
    c.beginCleaning(L1);
    await c.needsAttention(L1, "uninstall com.x failed");
    expect(holds.get("pd-a")).toEqual({ state: "needs-attention", reason: "uninstall com.x failed" });
    const again = await cleanups();
    expect(holds.get("pd-a")).toEqual({ state: "needs-attention", reason: "uninstall com.x failed" });
    expect(await again.clear("pd-a")).toBe("uninstall com.x failed");
    expect(holds.has("pd-a")).toBe(false);
    await cleanups();
    expect(holds.size).toBe(0);
  });

  it("turns a cleanup a restart cut short, and a lease that ended while stopped, into needs-attention", async () => {
    const c = await cleanups();
    await c.recordBaseline(L1, baseline, "");
    const begun = c.beginCleaning(L1);
    if (begun.started) await begun.stored;
    await c.recordBaseline({ leaseId: "l-2", physicalId: "pd-b" }, baseline, "");
    await c.recordBaseline({ leaseId: "l-3", physicalId: "pd-c" }, baseline, "");
    await cleanups(["l-3"]);
    expect(holds.get("pd-a")).toMatchObject({ state: "needs-attention", reason: expect.stringMatching(/cut short/) });
    expect(holds.get("pd-b")).toMatchObject({ state: "needs-attention", reason: expect.stringMatching(/ended while the coordinator was stopped/) });
    // Still leased: nothing to say yet.
    expect(holds.has("pd-c")).toBe(false);
  });

  it("refuses to clear a phone that is not marked, or whose cleanup still runs", async () => {
    const c = await cleanups();
    expect(await refusal(c.clear("pd-a"))).toMatchObject({ code: "NOT_FOUND", field: "device" });
    await c.recordBaseline(L1, baseline, "");
    expect(await refusal(c.clear("pd-a"))).toMatchObject({ code: "NOT_FOUND" });
    c.beginCleaning(L1);
    expect(await refusal(c.clear("pd-a"))).toMatchObject({ code: "DEVICE_BUSY" });
  });

  it("replicas: each change reaches the others, which hold the phone out of leases from the lease's end until its owner tells the outcome; an admin clears it through any", async () => {
    const a = await cleanups();
    const holdsA = holds;
    const b = await cleanups();
    const holdsB = holds;
    const toB: CleanupNotice[] = [];
    a.share(async (n) => void toB.push(n));
    b.share(async (n) => a.applyNotice(n));
    await a.recordBaseline(L1, baseline, "");
    // B knows the lease's phone is cleaned by A after it, without A's baseline.
    for (const n of toB.splice(0)) b.applyNotice(n);
    expect(b.rowOf("pd-a")).toMatchObject({ state: "leased", leaseId: "l-1", baseline: "" });
    expect(holdsB.size).toBe(0);
    // The lease ends; B hears of it first: held at once there, but not cleaned there.
    expect(b.beginCleaning(L1)).toEqual({ started: false });
    expect(holdsB.get("pd-a")).toEqual({ state: "cleaning", reason: "" });
    const begun = a.beginCleaning(L1);
    expect(begun.started).toBe(true);
    if (begun.started) await begun.stored;
    await a.needsAttention(L1, "uninstall com.x failed");
    for (const n of toB.splice(0)) b.applyNotice(n);
    expect(holdsB.get("pd-a")).toEqual({ state: "needs-attention", reason: "uninstall com.x failed" });
    // Cleared through B: back in the pool on A too, and nothing stored.
    expect(await b.clear("pd-a")).toBe("uninstall com.x failed");
    expect(holdsA.has("pd-a")).toBe(false);
    expect(a.rowOf("pd-a")).toBeUndefined();
    await cleanups();
    expect(holds.size).toBe(0);
  });

  it("replicas: a replica that missed notices takes the stored rows of the others' phones as the truth", async () => {
    const a = await cleanups();
    const b = await cleanups();
    const holdsB = holds;
    await a.recordBaseline(L1, baseline, "");
    a.beginCleaning(L1);
    await a.needsAttention(L1, "home failed");
    await b.resync();
    expect(holdsB.get("pd-a")).toEqual({ state: "needs-attention", reason: "home failed" });
    await a.clear("pd-a");
    await b.resync();
    expect(holdsB.has("pd-a")).toBe(false);
    expect(b.rowOf("pd-a")).toBeUndefined();
  });
});
