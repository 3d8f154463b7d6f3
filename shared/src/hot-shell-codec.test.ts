/**
 * The hot commands' own codecs against protobuf-es: the request bytes must
 * be toBinary's, byte for byte (random requests, seeded: a failure names its
 * seed); the answer reader must give fromBinary's message, own keys in the
 * same order, for random answers, and for mutated and cut bytes either the
 * same message or undefined (left to protobuf-es), never another message.
 */
import { describe, expect, it } from "vitest";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { RunShellRequestSchema, RunShellResponseSchema } from "./gen/farm/v1/device_service_pb.js";
import { ListDevicesRequestSchema } from "./gen/farm/v1/registry_service_pb.js";
import { encodeListDevicesRequest, encodeRunShellRequest, readRunShellResponse } from "./hot-shell-codec.js";
import { seededRandom } from "./testing/seeded-random.js";

function randomString(rand: () => number): string {
  if (rand() < 0.25) return "";
  const len = Math.floor(rand() * (rand() < 0.1 ? 300 : 30));
  let s = "";
  for (let i = 0; i < len; i++) {
    const kind = rand();
    s += kind < 0.8 ? String.fromCharCode(32 + Math.floor(rand() * 95)) : kind < 0.9 ? String.fromCharCode(0x80 + Math.floor(rand() * 0x700)) : kind < 0.97 ? "😀" : "\ufeff";
  }
  return s;
}

function randomBytes(rand: () => number): Uint8Array {
  if (rand() < 0.3) return new Uint8Array(0);
  const out = new Uint8Array(Math.floor(rand() * (rand() < 0.05 ? 5000 : 60)));
  for (let i = 0; i < out.length; i++) out[i] = Math.floor(rand() * 256);
  return out;
}

function randomExit(rand: () => number): number {
  const pick = rand();
  return pick < 0.4 ? 0 : pick < 0.7 ? Math.floor(rand() * 256) : pick < 0.85 ? -Math.floor(rand() * 2 ** 31) : Math.floor(rand() * 2 ** 31);
}

function randomResponse(rand: () => number) {
  const dispatched = rand();
  return create(RunShellResponseSchema, {
    actionId: randomString(rand),
    exitCode: randomExit(rand),
    stdout: randomBytes(rand),
    stderr: randomBytes(rand),
    ...(dispatched < 0.33 ? {} : { dispatched: dispatched < 0.66 }),
    ambiguous: rand() < 0.3,
  });
}

/** Own keys, in order, all the way down (what JSON.stringify or the printer would show). */
const keys = (v: unknown): unknown => (v instanceof Uint8Array ? [...v] : v !== null && typeof v === "object" ? Object.entries(v).map(([k, x]) => [k, keys(x)]) : v);

/** protobuf-es's message without its $typeName, as the reader gives it. */
function theirs(bytes: Uint8Array): unknown {
  const { $typeName: _, ...rest } = fromBinary(RunShellResponseSchema, bytes);
  return rest;
}

describe("hot-shell-codec", () => {
  it("writes RunShellRequest as toBinary does", () => {
    for (let seed = 1; seed <= 2000; seed++) {
      const rand = seededRandom(seed);
      const req = { target: { serial: randomString(rand), agent: randomString(rand), requestId: randomString(rand) }, command: randomString(rand) };
      expect(Buffer.from(encodeRunShellRequest(req)).toString("hex"), `seed ${seed}`).toBe(Buffer.from(toBinary(RunShellRequestSchema, create(RunShellRequestSchema, req))).toString("hex"));
    }
  });

  it("writes ListDevicesRequest as toBinary does", () => {
    for (let seed = 1; seed <= 2000; seed++) {
      const rand = seededRandom(seed);
      const req = { agent: randomString(rand), state: randomString(rand), pageSize: rand() < 0.5 ? 1000 : randomExit(rand), pageToken: randomString(rand) };
      expect(Buffer.from(encodeListDevicesRequest(req)).toString("hex"), `seed ${seed}`).toBe(Buffer.from(toBinary(ListDevicesRequestSchema, create(ListDevicesRequestSchema, req))).toString("hex"));
    }
  });

  it("reads every RunShellResponse toBinary writes as fromBinary does", () => {
    for (let seed = 1; seed <= 3000; seed++) {
      const bytes = toBinary(RunShellResponseSchema, randomResponse(seededRandom(seed)));
      const own = readRunShellResponse(bytes);
      // Strings toBinary wrote are valid UTF-8: the reader takes them all itself.
      expect(own, `seed ${seed}`).toBeDefined();
      expect(own, `seed ${seed}`).toStrictEqual(theirs(bytes));
      expect(JSON.stringify(keys(own)), `seed ${seed}`).toBe(JSON.stringify(keys(theirs(bytes))));
    }
  });

  it("gives protobuf-es's message or leaves it to protobuf-es for mutated and cut bytes", () => {
    let mine = 0;
    let left = 0;
    for (let seed = 1; seed <= 6000; seed++) {
      const rand = seededRandom(seed);
      const bytes = Uint8Array.from(toBinary(RunShellResponseSchema, randomResponse(rand)));
      if (bytes.length === 0) continue;
      const mutated = rand() < 0.3 ? bytes.subarray(0, Math.floor(rand() * bytes.length)) : bytes;
      for (let i = 0, n = 1 + Math.floor(rand() * 3); i < n && mutated.length > 0; i++) mutated[Math.floor(rand() * mutated.length)] = Math.floor(rand() * 256);
      const own = readRunShellResponse(mutated);
      if (own === undefined) {
        left++;
        continue;
      }
      mine++;
      expect(own, `seed ${seed}`).toStrictEqual(theirs(mutated));
      expect(JSON.stringify(keys(own)), `seed ${seed}`).toBe(JSON.stringify(keys(theirs(mutated))));
    }
    // Both branches ran: some mutations stay readable, some are left to protobuf-es.
    expect(mine).toBeGreaterThan(100);
    expect(left).toBeGreaterThan(100);
  });

  it("leaves unknown fields, odd varints and invalid UTF-8 to protobuf-es", () => {
    // Field 7 (unknown), a bool of 2, a 6-byte exit code, an action id that is not UTF-8.
    for (const hex of ["3801", "2802", "10ffffffff7f", "0a02c328"]) expect(readRunShellResponse(Buffer.from(hex, "hex")), hex).toBeUndefined();
    // An empty answer is the all-defaults message.
    expect(readRunShellResponse(new Uint8Array(0))).toStrictEqual(theirs(new Uint8Array(0)));
  });
});
