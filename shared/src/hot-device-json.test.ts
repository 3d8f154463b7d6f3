/**
 * The hot `farm devices`' JSON writer against protobuf-es's toJson (with
 * alwaysEmitImplicit, as commands/devices.ts calls it): random devices
 * (seeded; a failure names its seed), read back through farm's own page
 * reader as the hot path reads them, must give the same JSON text, key
 * order included; where toJson refuses (a time it cannot write), the
 * writer must say undefined, never write something else.
 */
import { describe, expect, it } from "vitest";
import { create, toBinary, toJson } from "@bufbuild/protobuf";
import { DeviceSchema } from "./gen/farm/v1/registry_pb.js";
import { ListDevicesResponseSchema } from "./gen/farm/v1/registry_service_pb.js";
import { hotDeviceJson } from "./hot-device-json.js";
import { readPlainPage } from "./list-devices-read.js";
import { seededRandom } from "./testing/seeded-random.js";

function randomString(rand: () => number): string {
  if (rand() < 0.3) return "";
  const len = Math.floor(rand() * 24);
  let s = "";
  for (let i = 0; i < len; i++) s += rand() < 0.9 ? String.fromCharCode(32 + Math.floor(rand() * 95)) : rand() < 0.5 ? "é" : "😀";
  return s;
}

function randomDevice(rand: () => number) {
  const s = () => randomString(rand);
  const nanosPick = rand();
  return create(DeviceSchema, {
    serial: s(),
    agentId: s(),
    agentName: s(),
    state: s(),
    quarantineReason: s(),
    attentionReason: s(),
    ...(rand() < 0.8
      ? {
        properties: {
          model: s(),
          manufacturer: s(),
          apiLevel: rand() < 0.1 ? Math.floor(rand() * 2 ** 32) : Math.floor(rand() * 40),
          androidVersion: s(),
          abi: s(),
          serialno: s(),
          bootId: s(),
          physicalId: s(),
          identityStatus: s(),
          pinLabel: s(),
          platform: s(),
          unresolvedActionIds: Array.from({ length: rand() < 0.7 ? 0 : Math.floor(rand() * 4) }, s),
        },
      }
      : {}),
    ...(rand() < 0.85
      ? {
        updateTime: {
          // Mostly now; sometimes the epoch, or far ahead (past what RFC 3339 JSON can say).
          seconds: rand() < 0.9 ? BigInt(1_700_000_000 + Math.floor(rand() * 1e8)) : rand() < 0.5 ? 0n : BigInt(253_402_300_799 + Math.floor(rand() * 10)),
          // Whole seconds, milliseconds, microseconds, nanoseconds, and now and then past 999,999,999 (toJson refuses).
          nanos: nanosPick < 0.2 ? 0 : nanosPick < 0.4 ? Math.floor(rand() * 1000) * 1e6 : nanosPick < 0.6 ? Math.floor(rand() * 1e6) * 1e3 : nanosPick < 0.95 ? Math.floor(rand() * 1e9) : 1e9 + Math.floor(rand() * 1000),
        },
      }
      : {}),
  });
}

function theirs(d: Parameters<typeof toJson<typeof DeviceSchema>>[1]): string | undefined {
  try {
    return JSON.stringify(toJson(DeviceSchema, d, { alwaysEmitImplicit: true }));
  } catch {
    return undefined;
  }
}

describe("hotDeviceJson", () => {
  it("writes what toJson writes, or undefined where toJson refuses", () => {
    let refused = 0;
    let written = 0;
    for (let seed = 1; seed <= 3000; seed++) {
      const rand = seededRandom(seed);
      const devices = Array.from({ length: 1 + Math.floor(rand() * 5) }, () => randomDevice(rand));
      const page = readPlainPage(toBinary(ListDevicesResponseSchema, create(ListDevicesResponseSchema, { devices })));
      if (!page) continue;
      for (const d of page.devices) {
        const own = hotDeviceJson(d);
        const expected = theirs(d);
        expect(own === undefined ? undefined : JSON.stringify(own), `seed ${seed}`).toBe(expected);
        if (expected === undefined) refused++;
        else written++;
      }
    }
    // Both branches ran.
    expect(written).toBeGreaterThan(1000);
    expect(refused).toBeGreaterThan(10);
  });
});
