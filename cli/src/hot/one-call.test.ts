/**
 * The hot commands' one-request client against a real `node:http2` server
 * on loopback: what it sends, what it records of each kind of answer, and
 * when it says nothing was sent (the command then takes its full path).
 */
import { createServer, constants, type Http2Server, type ServerHttp2Stream, type IncomingHttpHeaders } from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { frame, oneCall, plainAnswer, type OneCallOutcome, type OneCallRequest } from "./one-call.js";

let server: Http2Server | undefined;
/** Streams the server has seen, and the RST codes of those closed. */
let arrived = 0;
let closes: number[] = [];

afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A server whose every stream `answer` handles; resolves to its origin. */
async function serve(answer: (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, body: Buffer) => void): Promise<string> {
  server = createServer();
  arrived = 0;
  closes = [];
  server.on("stream", (stream, headers) => {
    arrived++;
    stream.on("close", () => closes.push(stream.rstCode));
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => answer(stream, headers, Buffer.concat(chunks)));
    stream.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", () => resolve()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function request(origin: string, more: Partial<OneCallRequest> = {}): OneCallRequest {
  return {
    origin,
    path: "/farm.v1.DeviceService/RunShell",
    headers: { "content-type": "application/grpc+proto", authorization: "Bearer t" },
    body: frame(Uint8Array.of(0x12, 1, 0x41)),
    waitMs: undefined,
    stop: undefined,
    maxBytes: 1024,
    ...more,
  };
}

const sent = (o: OneCallOutcome) => {
  if (!o.sent) throw new Error(`nothing was sent: ${String(o.error)}`);
  return o;
};

describe("oneCall", () => {
  it("sends the framed message with its headers and reads a plain answer", async () => {
    let seen: { headers: IncomingHttpHeaders; body: Buffer } | undefined;
    const origin = await serve((stream, headers, body) => {
      seen = { headers, body };
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(frame(Uint8Array.of(0x0a, 2, 0x61, 0x62)));
    });
    const o = sent(await oneCall(request(origin)));
    expect(seen?.headers[":path"]).toBe("/farm.v1.DeviceService/RunShell");
    expect(seen?.headers["authorization"]).toBe("Bearer t");
    expect([...(seen?.body ?? [])]).toEqual([0, 0, 0, 0, 3, 0x12, 1, 0x41]);
    expect([...(plainAnswer(o.events) ?? [])]).toEqual([0x0a, 2, 0x61, 0x62]);
    expect(o).toMatchObject({ timedOut: false, stopped: false, tooLarge: false });
  });

  it("leaves an error status, a trailers-only answer, a compressed message and a reset to the replay", async () => {
    const answers: ((s: ServerHttp2Stream) => void)[] = [
      (s) => {
        s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        s.on("wantTrailers", () => s.sendTrailers({ "grpc-status": "7", "grpc-message": "no" }));
        s.end(frame(Uint8Array.of()));
      },
      (s) => s.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "16" }, { endStream: true }),
      (s) => {
        s.respond({ ":status": 200, "content-type": "application/grpc", "grpc-encoding": "gzip" }, { waitForTrailers: true });
        s.on("wantTrailers", () => s.sendTrailers({ "grpc-status": "0" }));
        s.end(Buffer.from([1, 0, 0, 0, 0]));
      },
      (s) => s.close(constants.NGHTTP2_INTERNAL_ERROR),
    ];
    let next = 0;
    const origin = await serve((s) => answers[next++]!(s));
    for (let i = 0; i < answers.length; i++) {
      const o = sent(await oneCall(request(origin)));
      expect(plainAnswer(o.events), `answer ${i}`).toBeUndefined();
    }
    expect(next).toBe(answers.length);
  });

  it("says nothing was sent when the coordinator cannot be reached", async () => {
    const origin = await serve(() => undefined);
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    server = undefined;
    const o = await oneCall(request(origin));
    expect(o.sent).toBe(false);
  });

  it("cancels the stream at its local deadline, on the stop signal, and past maxBytes", async () => {
    const origin = await serve((s, headers) => {
      if (headers["x-case"] === "large") {
        s.respond({ ":status": 200, "content-type": "application/grpc" });
        s.write(Buffer.alloc(4096));
      }
      // Otherwise it never answers.
    });
    const timedOut = sent(await oneCall(request(origin, { waitMs: 50 })));
    expect(timedOut).toMatchObject({ timedOut: true, stopped: false });
    const stop = new AbortController();
    const stopped = oneCall(request(origin, { stop: stop.signal }));
    // Stopped once the server holds the stream.
    await expect.poll(() => arrived).toBe(2);
    stop.abort();
    expect(sent(await stopped)).toMatchObject({ stopped: true, timedOut: false });
    const large = sent(await oneCall(request(origin, { headers: { "x-case": "large" } })));
    expect(large).toMatchObject({ tooLarge: true });
    expect(plainAnswer(large.events)).toBeUndefined();
    await expect.poll(() => closes.length).toBe(3);
    expect(closes).toEqual([constants.NGHTTP2_CANCEL, constants.NGHTTP2_CANCEL, constants.NGHTTP2_CANCEL]);
  });
});
