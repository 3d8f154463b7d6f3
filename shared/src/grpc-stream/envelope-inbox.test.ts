import { describe, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { grpcEnvelope } from "../testing/grpc-envelope.js";
import { seededRandom } from "../testing/seeded-random.js";
import { EnvelopeInbox, type Envelope } from "./envelope-inbox.js";

function inbox(maxBytes = 1 << 20, highWaterBytes = 1 << 20) {
  const flow = { paused: false, pauses: 0 };
  const box = new EnvelopeInbox({
    maxBytes,
    highWaterBytes,
    pause: () => {
      flow.paused = true;
      flow.pauses++;
    },
    resume: () => (flow.paused = false),
  });
  return { box, flow };
}

async function drain(box: EnvelopeInbox): Promise<Envelope[]> {
  const out: Envelope[] = [];
  for await (const e of box) out.push(e);
  return out;
}

describe("EnvelopeInbox", () => {
  it("gives back the same messages however the bytes are cut (seeded)", async () => {
    for (let seed = 1; seed <= 200; seed++) {
      const next = seededRandom(seed);
      const messages = Array.from({ length: Math.floor(next() * 8) }, () => Buffer.from(Array.from({ length: Math.floor(next() * 70) }, () => Math.floor(next() * 256))));
      const bytes = Buffer.concat(messages.map((m, i) => grpcEnvelope(i % 2, m)));
      const { box } = inbox();
      for (let at = 0; at < bytes.length;) {
        const n = 1 + Math.floor(next() * 20);
        box.push(bytes.subarray(at, at + n));
        at += n;
      }
      box.end();
      const got = await drain(box);
      expect({ seed, got: got.map((e) => [e.flags, Buffer.from(e.data).toString("hex")]) }).toEqual({ seed, got: messages.map((m, i) => [i % 2, m.toString("hex")]) });
    }
  });

  it("refuses a message over the cap from its 5-byte prefix", () => {
    const { box } = inbox(100);
    let err: unknown;
    try {
      box.push(Buffer.from([0, 0, 0, 0]));
      box.push(Buffer.from([101]));
    } catch (e) {
      err = e;
    }
    expect(ConnectError.from(err).code).toBe(Code.ResourceExhausted);
  });

  it("fails an end inside a message", async () => {
    const { box } = inbox();
    box.push(grpcEnvelope(0, Buffer.from("abcdef")).subarray(0, 7));
    box.end();
    await expect(box.next()).rejects.toThrow(/incomplete envelope/);
  });

  it("pauses its source above the high water of whole messages and resumes when they are taken, empty ones counted", async () => {
    const { box, flow } = inbox(1 << 20, 50);
    for (let i = 0; i < 20; i++) box.push(grpcEnvelope(0, new Uint8Array(0)));
    expect(flow.paused).toBe(true);
    for (let i = 0; i < 15; i++) await box.next();
    expect(flow.paused).toBe(false);
    // A message larger than the high water still completes: a partial message never pauses.
    const big = grpcEnvelope(0, new Uint8Array(500));
    box.push(big.subarray(0, 300));
    expect(flow.paused).toBe(false);
    box.push(big.subarray(300));
    expect(flow.paused).toBe(true);
  });

  it("delivers what is ready before a failure", async () => {
    const { box } = inbox();
    box.push(grpcEnvelope(0, Buffer.from("x")));
    box.fail(new ConnectError("gone", Code.Unavailable));
    expect(Buffer.from((await box.next())!.data).toString()).toBe("x");
    await expect(box.next()).rejects.toThrow(/gone/);
  });

  it("drops what is ready when failed now (the caller gave up), even after its end", async () => {
    const { box } = inbox();
    box.push(grpcEnvelope(0, Buffer.from("x")));
    box.end();
    box.fail(new ConnectError("canceled", Code.Canceled), true);
    await expect(box.next()).rejects.toThrow(/canceled/);
  });
});
