import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "@farm/shared/log";
import type { ScreenEvent } from "@farm/shared/gen/farm/v1/live_screen_service_pb";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { shellV2 } from "../adb/adb-shell.js";
import { startSimPhones, type SimPhones } from "../testing/sim-phones.js";
import { runScreen } from "./screen-source.js";

/**
 * The live screen's source against a simulated phone behind a real adb
 * server: screenrecord's H.264 through `adb exec`, its restart, the JPEG
 * fallback and a turned phone.
 */

/** The part of a simulated phone used here. */
interface SimPhone {
  state: { screen: { start(pkg: string): unknown; home(): void } };
  faults: { set(f: Record<string, unknown>): void; isHung(service: string): boolean };
}

let lab: SimPhones<SimPhone>;
let addr: AdbServerAddress;
let serial: string;
let phone: SimPhone;

beforeAll(async () => {
  // A 720x1600 phone keeps encoding cheap.
  lab = await startSimPhones<SimPhone>([{ profile: 3 }]);
  ({ serial, device: phone } = lab.phones[0]!);
  addr = lab.addr;
}, 30_000);

afterAll(async () => {
  await lab?.stop();
});

/** Runs the source until `done` says enough (or `ms` pass), flipping the scene meanwhile; returns what it sent. */
async function collect(done: (events: ScreenEvent[]) => boolean, ms: number, recordLimitS?: number): Promise<ScreenEvent[]> {
  const events: ScreenEvent[] = [];
  const stop = new AbortController();
  let flip = false;
  const driver = setInterval(() => {
    flip = !flip;
    if (flip) phone.state.screen.start("com.android.settings");
    else phone.state.screen.home();
  }, 100);
  const deadline = setTimeout(() => stop.abort(), ms);
  const run = runScreen({
    adb: addr,
    serial,
    signal: stop.signal,
    log: createLogger({ level: "error" }),
    ...(recordLimitS ? { recordLimitS } : {}),
    emit: async (e) => {
      events.push(e);
      if (done(events)) stop.abort();
    },
  }).catch((err: unknown) => {
    if (!stop.signal.aborted) throw err;
  });
  await run;
  clearInterval(driver);
  clearTimeout(deadline);
  return events;
}

const formats = (events: ScreenEvent[]) => events.flatMap((e) => (e.kind.case === "format" ? [e.kind.value] : []));

describe("live screen source", () => {
  it("streams H.264 frames, each stream opening with its format and a key frame, and starts a new screenrecord when one ends", async () => {
    const events = await collect((es) => formats(es).length >= 2 && es.at(-1)?.kind.case === "frame" && es.filter((e) => e.kind.case === "frame").length > 20, 15_000, 2);
    expect(formats(events).length).toBeGreaterThanOrEqual(2);
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      if (e.kind.case !== "format") continue;
      expect(e.kind.value).toMatchObject({ codec: expect.stringMatching(/^avc1\.[0-9A-F]{6}$/), displayWidth: 720, displayHeight: 1600 });
      // A decoder can start right after each format.
      const next = events[i + 1];
      if (next?.kind.case === "frame") expect(next.kind.value.key).toBe(true);
    }
    const frames = events.flatMap((e) => (e.kind.case === "frame" ? [e.kind.value] : []));
    expect(frames.some((f) => !f.key)).toBe(true);
    // Annex B, whole frames.
    for (const f of frames) expect([...f.data.subarray(0, 3)]).toEqual([0, 0, 0]);
  });

  it("restarts in the new shape when the phone turns", async () => {
    let turned = false;
    try {
      const events = await collect((es) => {
        if (!turned && es.some((e) => e.kind.case === "frame")) {
          turned = true;
          void shellV2(addr, serial, "settings put system user_rotation 1");
        }
        return formats(es).some((f) => f.displayWidth === 1600);
      }, 15_000);
      expect(formats(events).map((f) => `${f.displayWidth}x${f.displayHeight}`)).toEqual(["720x1600", "1600x720"]);
    } finally {
      await shellV2(addr, serial, "settings put system user_rotation 0");
    }
  });

  it("starts a silent screenrecord again instead of taking the phone for one without H.264", async () => {
    // The first screenrecord is opened and never answers (as on a host too busy to start it in time); later ones work.
    const isHung = phone.faults.isHung.bind(phone.faults);
    let screenrecords = 0;
    phone.faults.isHung = (service) => (service.startsWith("exec:screenrecord") ? ++screenrecords === 1 : isHung(service));
    try {
      const events = await collect((es) => es.some((e) => e.kind.case === "frame"), 30_000);
      expect(screenrecords).toBe(2);
      expect(formats(events)).toHaveLength(1);
      expect(formats(events)[0]?.codec).toMatch(/^avc1\./);
    } finally {
      phone.faults.isHung = isHung;
    }
  });

  it("sends screencap images as JPEG when the phone has no H.264 encoder", async () => {
    phone.faults.set({ screenrecordFails: true });
    try {
      const events = await collect((es) => es.filter((e) => e.kind.case === "frame").length >= 2, 15_000);
      expect(formats(events)[0]).toMatchObject({ codec: "image/jpeg", displayWidth: 720, displayHeight: 1600 });
      const frame = events.find((e) => e.kind.case === "frame");
      expect(frame?.kind.case === "frame" && [...frame.kind.value.data.subarray(0, 2)]).toEqual([0xff, 0xd8]);
    } finally {
      phone.faults.set({ screenrecordFails: null });
    }
  });
});
