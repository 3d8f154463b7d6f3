import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { create, toBinary } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { createMethodSerializationLookup, pipe, transformDecompressEnvelope, transformParseEnvelope, transformSplitEnvelope } from "@connectrpc/connect/protocol";
import { RegistryService, ListDevicesRequestSchema } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { readUnaryMessage } from "./unary-envelope-reader.js";
import { grpcEnvelope } from "@farm/shared/testing/grpc-envelope";
import { seededRandom } from "@farm/shared/testing/seeded-random";

const method = RegistryService.method.listDevices;
const CAP = 64;

type Outcome = { ok: unknown } | { code: number; message: string };

const outcome = async (run: () => Promise<unknown>): Promise<Outcome> => {
  try {
    return { ok: await run() };
  } catch (e) {
    const err = ConnectError.from(e);
    return { code: err.code, message: err.rawMessage };
  }
};

/** What Connect's gRPC handler makes of the same chunks: split, decompress (none negotiated), parse, then exactly one message. */
async function connectReads(chunks: Buffer[]): Promise<unknown> {
  const serialization = createMethodSerializationLookup(method, undefined, undefined, { readMaxBytes: CAP, writeMaxBytes: 0xffffffff });
  const it = pipe(
    (async function* () {
      yield* chunks;
    })(),
    transformSplitEnvelope(CAP),
    transformDecompressEnvelope(null, CAP),
    transformParseEnvelope(serialization.getI(true)),
  )[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done === true) throw new ConnectError("protocol error: missing input message for unary method", 12);
  const second = await it.next();
  if (second.done !== true) throw new ConnectError("protocol error: received extra input message for unary method", 12);
  return first.value;
}

async function ourReads(chunks: Buffer[]): Promise<unknown> {
  const body = new PassThrough();
  const read = readUnaryMessage(body, method.input, CAP);
  // It may fail before every chunk is written; the caller sees that failure.
  read.catch(() => {});
  for (const c of chunks) {
    body.write(c);
    // Each chunk its own "data" event, as frames arrive.
    await new Promise((r) => setImmediate(r));
  }
  body.end();
  return read;
}

const envelope = grpcEnvelope;

/** Bytes a broken or hostile client might send: envelopes good and bad, lengths over the cap, cut bodies, noise. */
function body(next: () => number): Buffer {
  const good = Buffer.from(toBinary(ListDevicesRequestSchema, create(ListDevicesRequestSchema, { pageSize: Math.floor(next() * 500), pageToken: "t".repeat(Math.floor(next() * 20)) })));
  const noise = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(next() * 256)));
  const parts: Buffer[] = [];
  const count = Math.floor(next() * 3);
  for (let i = 0; i <= count; i++) {
    const pick = next();
    if (pick < 0.35) parts.push(envelope(0, good));
    else if (pick < 0.5) parts.push(envelope(0, noise(Math.floor(next() * 40))));
    else if (pick < 0.6) parts.push(envelope(1, good));
    else if (pick < 0.7) parts.push(envelope(next() < 0.5 ? 0x80 : 0x02, good));
    else if (pick < 0.8) parts.push(envelope(0, good, CAP + 1 + Math.floor(next() * 1e9)));
    else if (pick < 0.9) parts.push(envelope(0, good).subarray(0, Math.floor(next() * (good.length + 5))));
    else parts.push(noise(Math.floor(next() * 30)));
  }
  return Buffer.concat(parts);
}

function chunked(bytes: Buffer, next: () => number): Buffer[] {
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length;) {
    const n = 1 + Math.floor(next() * Math.min(12, bytes.length - at));
    chunks.push(bytes.subarray(at, at + n));
    at += n;
  }
  return chunks;
}

describe("readUnaryMessage", () => {
  it("reads one message, whole or in pieces", async () => {
    const msg = create(ListDevicesRequestSchema, { pageSize: 7, pageToken: "abc" });
    const bytes = envelope(0, toBinary(ListDevicesRequestSchema, msg));
    expect((await ourReads([bytes])) as unknown).toMatchObject({ pageSize: 7, pageToken: "abc" });
    expect((await ourReads([...bytes].map((b) => Buffer.from([b])))) as unknown).toMatchObject({ pageSize: 7, pageToken: "abc" });
  });

  it("refuses a length over the cap from the envelope's header, before its bytes come", async () => {
    const body = new PassThrough();
    const read = outcome(() => readUnaryMessage(body, method.input, CAP));
    // The header alone; the body stays open, as a client still sending.
    body.write(envelope(0, new Uint8Array(0), 100 * 1024 * 1024));
    expect(await read).toEqual({ code: 8, message: `message size ${100 * 1024 * 1024} is larger than configured readMaxBytes ${CAP}` });
    body.destroy();
  });

  it("fails a body closed before its end (a reset) as cancelled", async () => {
    const body = new PassThrough();
    const read = outcome(() => readUnaryMessage(body, method.input, CAP));
    body.write(Buffer.from([0, 0, 0]));
    body.destroy();
    expect(await read).toMatchObject({ code: 1 });
  });

  it("answers as Connect's own reader does, for random bytes in random pieces (seeded)", async () => {
    let failures = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const next = seededRandom(seed);
      const bytes = body(next);
      const chunks = next() < 0.3 ? [bytes] : chunked(bytes, next);
      const [theirs, ours] = [await outcome(() => connectReads(chunks)), await outcome(() => ourReads(chunks))];
      expect({ seed, outcome: ours }).toEqual({ seed, outcome: theirs });
      if (!("ok" in ours)) failures++;
    }
    // The generator reaches both kinds of answer.
    expect(failures).toBeGreaterThan(50);
    expect(failures).toBeLessThan(400);
  });
});
