/**
 * farm's own ListDevicesResponse decoder against protobuf-es's fromBinary:
 * random pages (seeded; a failure names its seed) must give deep-equal
 * messages, own keys in the same order; mutated and cut bytes must give the
 * same message or the same error; and the pages farm sends must be read by
 * the decoder itself, not handed back to protobuf-es.
 */
import { describe, expect, it } from "vitest";
import { create, fromBinary, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { DeviceSchema } from "./gen/farm/v1/registry_pb.js";
import { ListDevicesResponseSchema } from "./gen/farm/v1/registry_service_pb.js";
import { decodeListDevicesResponse, readPlainPage } from "./list-devices-decode.js";
import { decodeAnswer } from "./answer-decode.js";
import { seededRandom } from "./testing/seeded-random.js";

type DeviceInit = MessageInitShape<typeof DeviceSchema>;

/** The outcome of decoding: the message, or the error's message. */
function outcome(decode: () => unknown): { ok?: unknown; error?: string } {
  try {
    return { ok: decode() };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/** Deep-equal, and every object's own keys in the same order (what JSON.stringify or a table would show). */
function expectSame(own: unknown, theirs: unknown, seed: number): void {
  expect(own, `seed ${seed}`).toStrictEqual(theirs);
  const keys = (v: unknown): unknown => (v !== null && typeof v === "object" ? (Array.isArray(v) ? v.map(keys) : Object.entries(v).map(([k, x]) => [k, keys(x)])) : typeof v === "bigint" ? `${v}n` : v);
  expect(JSON.stringify(keys(own)), `seed ${seed}`).toBe(JSON.stringify(keys(theirs)));
}

function randomString(rand: () => number): string {
  const pick = rand();
  if (pick < 0.15) return "";
  const len = Math.floor(rand() * (rand() < 0.1 ? 120 : 24));
  let s = "";
  for (let i = 0; i < len; i++) {
    const kind = rand();
    // Mostly ASCII, as farm's ids and names are; some Latin-1, CJK, emoji and a BOM.
    s += kind < 0.85
      ? String.fromCharCode(32 + Math.floor(rand() * 95))
      : kind < 0.9
      ? String.fromCharCode(0x80 + Math.floor(rand() * 0x80))
      : kind < 0.95
      ? String.fromCharCode(0x4e00 + Math.floor(rand() * 100))
      : kind < 0.98
      ? "😀"
      : "\ufeff";
  }
  return s;
}

function randomDevice(rand: () => number): DeviceInit {
  const s = () => (rand() < 0.3 ? "" : randomString(rand));
  // A few repeated values, as a real page repeats states, models and agent names.
  const common = (xs: string[]) => (rand() < 0.7 ? xs[Math.floor(rand() * xs.length)] as string : s());
  return {
    serial: s(),
    agentId: common(["agent-a", "agent-b"]),
    agentName: common(["lab-1", "lab-2"]),
    state: common(["device", "offline", "agent-offline"]),
    quarantineReason: rand() < 0.1 ? s() : "",
    attentionReason: rand() < 0.1 ? s() : "",
    ...(rand() < 0.85
      ? {
        properties: {
          model: common(["Pixel 7", "SM-G991B"]),
          manufacturer: s(),
          apiLevel: rand() < 0.1 ? Math.floor(rand() * 2 ** 32) : Math.floor(rand() * 40),
          androidVersion: s(),
          abi: s(),
          serialno: s(),
          bootId: s(),
          physicalId: s(),
          identityStatus: common(["ok", "duplicate"]),
          pinLabel: s(),
          platform: common(["android", "ios", ""]),
          unresolvedActionIds: Array.from({ length: rand() < 0.8 ? 0 : Math.floor(rand() * 4) }, s),
        },
      }
      : {}),
    ...(rand() < 0.85
      ? {
        updateTime: {
          // Mostly now; sometimes before 1970 or past 2106 (varints the decoder leaves to protobuf-es).
          seconds: rand() < 0.9 ? BigInt(1_700_000_000 + Math.floor(rand() * 1e8)) : BigInt(Math.floor((rand() - 0.5) * 2 ** 40)),
          nanos: Math.floor(rand() * 1e9),
        },
      }
      : {}),
  };
}

function randomPage(rand: () => number): Uint8Array {
  const devices = Array.from({ length: Math.floor(rand() * 30) }, () => randomDevice(rand));
  return toBinary(ListDevicesResponseSchema, create(ListDevicesResponseSchema, { devices, nextPageToken: rand() < 0.5 ? randomString(rand) : "" }));
}

const theirs = (bytes: Uint8Array) => fromBinary(ListDevicesResponseSchema, bytes);
const ours = (bytes: Uint8Array) => decodeListDevicesResponse(ListDevicesResponseSchema, bytes);

describe("decodeListDevicesResponse", () => {
  it("reads a page as farm sends it itself, to the same message as protobuf-es", () => {
    const devices = Array.from({ length: 50 }, (_, i) => ({
      serial: `R58M${i}`,
      agentId: "7f0c",
      agentName: "lab-1",
      state: "device",
      properties: {
        model: "Pixel 7",
        manufacturer: "Google",
        apiLevel: 34,
        androidVersion: "14",
        abi: "arm64-v8a",
        serialno: `SN${i}`,
        bootId: "b",
        physicalId: `pd-${i}`,
        identityStatus: "ok",
        platform: "android",
        unresolvedActionIds: i === 3 ? ["a1", "a2"] : [],
      },
      updateTime: { seconds: 1_765_000_000n, nanos: 5 },
      attentionReason: i === 7 ? "cleanup failed: adb offline" : "",
    }));
    const bytes = toBinary(ListDevicesResponseSchema, create(ListDevicesResponseSchema, { devices, nextPageToken: "next" }));
    const page = readPlainPage(bytes);
    expect(page).toBeDefined();
    expectSame(page, theirs(bytes), 0);
    expectSame(decodeAnswer(ListDevicesResponseSchema, bytes), theirs(bytes), 0);
  });

  it("gives protobuf-es's message for random pages (differential, seeded)", () => {
    let readItself = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const rand = seededRandom(seed);
      const bytes = randomPage(rand);
      if (readPlainPage(bytes) !== undefined) readItself++;
      expectSame(ours(bytes), theirs(bytes), seed);
    }
    // Most random pages are plain enough for the decoder itself; the rest went to protobuf-es.
    expect(readItself).toBeGreaterThan(100);
  });

  it("gives protobuf-es's message or error for mutated and cut bytes (fuzzed, seeded)", () => {
    let readItself = 0;
    for (let seed = 1; seed <= 1500; seed++) {
      const rand = seededRandom(seed * 7919);
      const bytes = Uint8Array.from(randomPage(rand));
      const mutated = bytes.length === 0 ? new Uint8Array([Math.floor(rand() * 256)]) : bytes;
      const edits = 1 + Math.floor(rand() * 4);
      let data = mutated;
      for (let e = 0; e < edits && data.length > 0; e++) {
        const at = Math.floor(rand() * data.length);
        const kind = rand();
        // A printable byte mostly lands in a string and keeps the page readable; any byte mostly breaks its structure.
        if (kind < 0.35) data[at] = 0x20 + Math.floor(rand() * 95);
        else if (kind < 0.6) data[at] = Math.floor(rand() * 256);
        else if (kind < 0.8) data = data.subarray(0, at);
        else data = Uint8Array.from([...data.subarray(0, at), Math.floor(rand() * 256), ...data.subarray(at)]);
      }
      if (outcome(() => readPlainPage(data)).ok !== undefined) readItself++;
      const a = outcome(() => ours(data));
      const b = outcome(() => theirs(data));
      if (b.error !== undefined) expect(a, `seed ${seed}`).toEqual(b);
      else {
        expect("ok" in a, `seed ${seed}: ${a.error ?? ""}`).toBe(true);
        expectSame((a as { ok: unknown }).ok, b.ok, seed);
      }
    }
    // Mutations the decoder read itself (a changed byte inside a string, a cut at a field's end), not only ones it handed on.
    expect(readItself).toBeGreaterThan(50);
  });

  it("merges a message field sent twice, keeps unknown fields, and reads invalid UTF-8 as protobuf-es does", () => {
    const device = (d: DeviceInit) => toBinary(DeviceSchema, create(DeviceSchema, d));
    const w = new BinaryWriter();
    // One device whose properties and update time come in two parts each.
    const twice = new Uint8Array([...device({ serial: "a", properties: { model: "m" }, updateTime: { seconds: 5n } }), ...device({ properties: { apiLevel: 30, unresolvedActionIds: ["x"] }, updateTime: { nanos: 7 } })]);
    w.tag(1, WireType.LengthDelimited).bytes(twice);
    // A field this farm does not know (a newer coordinator's), and one known with another wire type.
    w.tag(1, WireType.LengthDelimited).bytes(new Uint8Array([...device({ serial: "b" }), ...new BinaryWriter().tag(99, WireType.Varint).uint32(1).finish()]));
    const merged = w.finish();
    expect(readPlainPage(merged)).toBeUndefined();
    expectSame(ours(merged), theirs(merged), 0);
    const onlyMerged = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(twice).finish();
    expect(readPlainPage(onlyMerged)).toBeDefined();
    expectSame(ours(onlyMerged), theirs(onlyMerged), 0);
    expect(ours(onlyMerged).devices[0]?.properties?.unresolvedActionIds).toEqual(["x"]);
    // A serial of invalid UTF-8 (0xff): whatever protobuf-es makes of it.
    const bad = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(new Uint8Array([0x61, 0xff])).finish()).finish();
    expect(outcome(() => ours(bad))).toEqual(outcome(() => theirs(bad)));
  });

  it("refuses another message type", () => {
    expect(() => decodeListDevicesResponse(DeviceSchema, new Uint8Array())).toThrow(/reads farm.v1.ListDevicesResponse/);
  });
});
