import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { shellV2 } from "../adb/adb-shell.js";
import { startSimPhones, type SimPhones } from "../testing/sim-phones.js";
import { captureHierarchy, readReadiness } from "./still-capture.js";

/**
 * The UIAutomator hierarchy reader against a simulated phone behind a real
 * adb server: readiness, the dump and its document read in one shell, and
 * each way it fails.
 */

/** The part of a simulated phone used here. */
interface SimPhone {
  state: { display: { screenOn: boolean; locked: boolean } };
  faults: { set(f: Record<string, unknown>): void; clear(): void };
}

let lab: SimPhones<SimPhone>;
let addr: AdbServerAddress;
let serial: string;
let phone: SimPhone;
const plenty = () => 10_000;

beforeAll(async () => {
  lab = await startSimPhones<SimPhone>([{ profile: 3 }]);
  ({ serial, device: phone } = lab.phones[0]!);
  addr = lab.addr;
}, 30_000);

afterAll(async () => {
  await lab?.stop();
});

/** Files the dumps left in /data/local/tmp (cleanup runs after the answer, so polled). */
async function dumpFiles(): Promise<string[]> {
  const r = await shellV2(addr, serial, "ls /data/local/tmp");
  return r.stdout.toString("utf8").split(/\s+/).filter((n) => n.startsWith("farm-ui-"));
}

describe("captureHierarchy", () => {
  it("returns the document alone, with the dump's own message in the record, and removes the file from the phone", async () => {
    const r = await captureHierarchy(addr, serial, "t-ok", plenty);
    expect(r.error).toBeUndefined();
    const xml = r.xml?.toString("utf8") ?? "";
    expect(xml.startsWith("<?xml")).toBe(true);
    expect(xml).not.toContain("dumped to");
    expect(r.record).toMatchObject({ ok: true, exitCode: 0, awake: true, locked: false, bytes: r.xml?.length });
    expect(String(r.record["output"])).toBe("UI hierchary dumped to: /data/local/tmp/farm-ui-t-ok.xml");
    for (let i = 0; i < 50 && (await dumpFiles()).length > 0; i++) await new Promise((res) => setTimeout(res, 20));
    expect(await dumpFiles()).toEqual([]);
  });

  it("says HIERARCHY_DUMP_FAILED with uiautomator's words when the dump cannot be written", async () => {
    phone.faults.set({ storageFull: true });
    try {
      const r = await captureHierarchy(addr, serial, "t-full", plenty);
      expect(r.xml).toBeUndefined();
      expect(r.error).toMatchObject({ code: "HIERARCHY_DUMP_FAILED", component: "uiautomator" });
      expect(r.error?.message).toMatch(/^uiautomator dump failed \(exit 1\): ERROR: could not write/);
      expect(r.record).toMatchObject({ ok: false, exitCode: 1 });
    } finally {
      phone.faults.clear();
    }
  });

  it("does not dump a screen that is off or locked", async () => {
    phone.state.display.screenOn = false;
    try {
      expect((await captureHierarchy(addr, serial, "t-off", plenty)).error).toMatchObject({ code: "DEVICE_ASLEEP", component: "readiness" });
    } finally {
      phone.state.display.screenOn = true;
    }
    phone.state.display.locked = true;
    try {
      expect((await captureHierarchy(addr, serial, "t-locked", plenty)).error).toMatchObject({ code: "DEVICE_LOCKED", component: "readiness" });
    } finally {
      phone.state.display.locked = false;
    }
    expect(await readReadiness(addr, serial, plenty)).toEqual({ awake: true, locked: false });
  });

  it("goes by readiness its caller read earlier (alongside the screenshot) instead of reading it again", async () => {
    const r = await captureHierarchy(addr, serial, "t-early", plenty, Promise.resolve({ awake: true, locked: true }));
    expect(r.error).toMatchObject({ code: "DEVICE_LOCKED" });
    expect(r.record).toMatchObject({ dispatched: false, locked: true });
  });

  it("names a dump that did not finish within the budget as a timeout, not as a failed read", async () => {
    phone.faults.set({ hangServices: ["shell,v2,raw:uiautomator"] });
    try {
      const r = await captureHierarchy(addr, serial, "t-hang", () => 300, Promise.resolve({ awake: true, locked: false }));
      expect(r.error).toMatchObject({ code: "COMMAND_TIMEOUT", component: "adb" });
      expect(r.error?.message).toMatch(/^uiautomator dump did not finish/);
      expect(r.record).toMatchObject({ ok: false, exitCode: null });
    } finally {
      phone.faults.clear();
    }
  });
});
