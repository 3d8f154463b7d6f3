import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "@farm/shared/log";
import type { DeviceReport } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { createAdbClient } from "../adb/adb-client.js";
import { startSimPhones, type SimPhones } from "../testing/sim-phones.js";
import { DeviceWatcher, type DeviceEvent } from "./device-watcher.js";

/** The part of a devsim phone this test uses: its switchable faults. */
interface FaultyPhone {
  faults: { set(changes: { hangServices?: string[] | null }): void };
}

let starting: Promise<SimPhones<FaultyPhone>> | undefined;
let watcher: DeviceWatcher | undefined;

/** Starts the phones; afterEach stops them even if the test timed out while they were starting. */
function startPhones(): Promise<SimPhones<FaultyPhone>> {
  return (starting = startSimPhones<FaultyPhone>(1));
}

afterEach(async () => {
  watcher?.stop();
  watcher = undefined;
  const sim = await starting?.catch(() => undefined);
  starting = undefined;
  await sim?.stop();
});

/** Resolves with the first event the predicate accepts. */
function nextEvent(w: DeviceWatcher, accept: (e: DeviceEvent) => boolean): Promise<DeviceEvent> {
  return new Promise((resolve) => {
    const off = w.onEvent((e) => {
      if (!accept(e)) return;
      off();
      resolve(e);
    });
  });
}

const withIdentity = (e: DeviceEvent): e is { kind: "upsert"; report: DeviceReport } => e.kind === "upsert" && Boolean(e.report.properties?.physicalId);

describe("DeviceWatcher", () => {
  it("reads a phone's identity again when the first read failed, so the phone does not stay identity-pending", async () => {
    const sim = await startPhones();
    const phone = sim.phones[0]!;
    // Every shell stream is accepted and never answered: getprop cannot finish.
    phone.device.faults.set({ hangServices: ["shell:", "shell,"] });
    const warnings: string[] = [];
    let failedRead: () => void = () => {};
    const firstFailure = new Promise<void>((resolve) => (failedRead = resolve));
    const log = createLogger({
      level: "warn",
      write: (line) => {
        const entry = JSON.parse(line) as { msg: string; serial?: string };
        warnings.push(entry.msg);
        if (entry.msg === "could not read device properties" && entry.serial === phone.serial) failedRead();
      },
    });
    watcher = new DeviceWatcher({ adb: createAdbClient(sim.addr), server: sim.addr, log, propertyTimeoutMs: 200, propertyRetry: { initialMs: 50, maxMs: 200 } });
    const identified = nextEvent(watcher, withIdentity);
    watcher.start();
    await firstFailure;
    expect(watcher.device(phone.serial)).toBeUndefined();
    // The phone answers again; nothing about its adb state changes.
    phone.device.faults.set({ hangServices: null });
    const e = (await identified) as { kind: "upsert"; report: DeviceReport };
    expect(e.report.serial).toBe(phone.serial);
    expect(e.report.state).toBe("device");
    expect(watcher.device(phone.serial)?.identity.physicalId).toBe(e.report.properties?.physicalId);
    expect(warnings).toContain("could not read device properties");
  });

  it("stops reading again once the phone is no longer online", async () => {
    const sim = await startPhones();
    const phone = sim.phones[0]!;
    phone.device.faults.set({ hangServices: ["shell:", "shell,"] });
    let failures = 0;
    let failedTwice: () => void = () => {};
    const twice = new Promise<void>((resolve) => (failedTwice = resolve));
    const log = createLogger({
      level: "warn",
      write: (line) => {
        if ((JSON.parse(line) as { msg: string }).msg === "could not read device properties" && ++failures === 2) failedTwice();
      },
    });
    watcher = new DeviceWatcher({ adb: createAdbClient(sim.addr), server: sim.addr, log, propertyTimeoutMs: 100, propertyRetry: { initialMs: 20, maxMs: 50 } });
    // Its devsim and adb server stop: the phone is removed, or turns unavailable with the server.
    const gone = nextEvent(watcher, (e) => (e.kind === "removed" ? e.serial === phone.serial : e.report.serial === phone.serial && e.report.state !== "device"));
    watcher.start();
    await twice;
    await sim.stop();
    await gone;
    expect(watcher.pendingIdentityReads).toBe(0);
  });
});
