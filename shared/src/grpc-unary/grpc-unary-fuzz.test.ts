/**
 * Fuzzing the hand-framed unary client's parsing with a seeded generator
 * (a failure names its seed): the envelope reader fed valid messages in
 * random chunks and random bytes, and the whole client against a real
 * HTTP/2 server answering with random bodies, statuses, messages and
 * status details. Nothing may throw but a ConnectError, and every call
 * must settle on the server's answer (a hang would end in the test's long
 * deadline, which is asserted never to be what ended a call).
 */
import { createServer, type Http2Server, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { create, toBinary } from "@bufbuild/protobuf";
import { DeviceService, RunShellResponseSchema } from "../gen/farm/v1/device_service_pb.js";
import { grpcUnary } from "./grpc-unary-transport.js";
import { UnaryEnvelopeReader } from "./unary-envelope.js";
import { seededRandom } from "../testing/seeded-random.js";

const rng = seededRandom;
const int = (r: () => number, n: number) => Math.floor(r() * n);
const bytes = (r: () => number, n: number) => Buffer.from(Array.from({ length: n }, () => int(r, 256)));

function envelope(data: Uint8Array, flags = 0): Buffer {
  const b = Buffer.alloc(data.length + 5);
  b[0] = flags;
  b.writeUInt32BE(data.length, 1);
  b.set(data, 5);
  return b;
}

/** Splits bytes at random points (empty pieces included). */
function chunked(r: () => number, all: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let i = 0;
  while (i < all.length) {
    const n = int(r, Math.min(all.length - i, 40) + 1);
    out.push(all.subarray(i, i + n));
    i += n;
  }
  return out;
}

describe("the unary envelope reader, fuzzed", () => {
  it("reads any valid message whatever its chunking", () => {
    for (let seed = 1; seed <= 500; seed++) {
      const r = rng(seed);
      const message = bytes(r, int(r, 300));
      const reader = new UnaryEnvelopeReader(1024);
      for (const c of chunked(r, envelope(message))) reader.push(c);
      expect(Buffer.from(reader.finish() ?? []).equals(message), `seed ${seed}`).toBe(true);
    }
  });

  it("throws nothing but a ConnectError on random bytes", () => {
    for (let seed = 1; seed <= 2000; seed++) {
      const r = rng(seed);
      const reader = new UnaryEnvelopeReader(int(r, 2) ? 64 : 1 << 20);
      // A third random bytes, a third a real envelope's start with random bytes after, a third a real envelope cut anywhere.
      const message = envelope(bytes(r, int(r, 80)));
      const input = [
        () => bytes(r, int(r, 120)),
        () => Buffer.concat([message.subarray(0, 5 + int(r, message.length - 4)), bytes(r, int(r, 120))]),
        () => message.subarray(0, int(r, message.length + 1)),
      ][int(r, 3)]?.() as Buffer;
      try {
        for (const c of chunked(r, input)) reader.push(c);
        reader.finish();
      } catch (err) {
        expect(err, `seed ${seed}`).toBeInstanceOf(ConnectError);
      }
    }
  });
});

/**
 * A bare node:http2 server for one describe block, listening from beforeAll to afterAll: each stream is
 * given to `answer` as the block last set it (per seed). `url` is set once it listens.
 */
function answeringServer(): { url: string; answer: (s: ServerHttp2Stream) => void } {
  const state = { url: "", answer: (_s: ServerHttp2Stream) => {} };
  let server: Http2Server;
  const sessions: ServerHttp2Session[] = [];
  beforeAll(async () => {
    server = createServer();
    server.on("session", (s) => {
      sessions.push(s);
      s.on("error", () => {});
    });
    server.on("stream", (s) => {
      s.on("error", () => {});
      state.answer(s);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const s of sessions) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return state;
}

describe("the unary client against random answers, fuzzed", () => {
  /** What the server answers next (`answer`), set per seed. */
  const srv = answeringServer();

  it("settles every call with a message or a ConnectError", async () => {
    const sessionManager = new Http2SessionManager(srv.url);
    const unary = grpcUnary({ baseUrl: srv.url, sessions: sessionManager, readMaxBytes: 4096 });
    const valid = toBinary(RunShellResponseSchema, create(RunShellResponseSchema, { exitCode: 2, stdout: Buffer.from("ok") }));
    const outcomes = { ok: 0, failed: 0 };
    for (let seed = 1; seed <= 300; seed++) {
      const r = rng(seed);
      const text = (n: number) => Array.from({ length: n }, () => "%%abcé\u00ff0123456789ABCDEF,- "[int(r, 24)]).join("");
      const trailers: Record<string, string> = {};
      // Any status but DEADLINE_EXCEEDED (4), which the test keeps to mean "hung until its own deadline".
      const n = int(r, 19);
      const status = [String(n >= 4 ? n + 1 : n), "0", text(3), ""][int(r, 4)] as string;
      if (int(r, 4)) trailers["grpc-status"] = status;
      if (int(r, 2)) trailers["grpc-message"] = text(int(r, 20));
      if (int(r, 3) === 0) trailers["grpc-status-details-bin"] = bytes(r, int(r, 40)).toString("base64").replace(/=+$/, "");
      const body = [envelope(valid), envelope(bytes(r, int(r, 60))), bytes(r, int(r, 60)), Buffer.alloc(0)][int(r, 4)] as Buffer;
      const trailersOnly = int(r, 5) === 0;
      const statusCode = int(r, 8) === 0 ? [200, 204, 400, 404, 503][int(r, 5)] as number : 200;
      const contentType = ["application/grpc", "application/grpc+proto", "text/html"][int(r, 8) === 0 ? 2 : int(r, 2)] as string;
      const pieces = chunked(r, body);
      srv.answer = (s) => {
        if (trailersOnly) {
          s.respond({ ":status": statusCode, "content-type": contentType, ...trailers }, { endStream: true });
          return;
        }
        s.respond({ ":status": statusCode, "content-type": contentType }, { waitForTrailers: true });
        s.once("wantTrailers", () => s.sendTrailers(trailers));
        for (const p of pieces) s.write(p);
        s.end();
      };
      try {
        await unary(DeviceService.method.runShell, undefined, 20_000, undefined, { command: "x" });
        outcomes.ok++;
      } catch (err) {
        expect(err, `seed ${seed}`).toBeInstanceOf(ConnectError);
        expect((err as ConnectError).code, `seed ${seed}: the call hung until its deadline`).not.toBe(Code.DeadlineExceeded);
        outcomes.failed++;
      }
    }
    sessionManager.abort();
    // Both outcomes were reached: the fuzz exercised the success path and the refusals.
    expect(outcomes.ok).toBeGreaterThan(0);
    expect(outcomes.failed).toBeGreaterThan(0);
  });
});

describe("the unary client judges answers as connect-node's gRPC client does, fuzzed", () => {
  const srv = answeringServer();

  // The usual answer is read without connect's validators (grpc-unary-transport.ts, plainOk): every answer near that shortcut's edges
  // (content types, statuses in headers and trailers, status details saying OK or not, repeated fields) must end as connect's client ends it.
  it("succeeds exactly when connect's client does, with the same message, and fails with the same code", async () => {
    const sessionManager = new Http2SessionManager(srv.url);
    const unary = grpcUnary({ baseUrl: srv.url, sessions: sessionManager });
    const connect = createClient(DeviceService, createGrpcTransport({ baseUrl: srv.url }));
    const valid = toBinary(RunShellResponseSchema, create(RunShellResponseSchema, { exitCode: 2, stdout: Buffer.from("ok") }));
    // A google.rpc.Status by hand (field 1 the code, field 2 the message), as grpc-status-details-bin carries it: code 0 says OK.
    const details = (code: number) => Buffer.from([...(code ? [0x08, code] : []), 0x12, 12, ...Buffer.from("from details")]).toString("base64").replace(/=+$/, "");
    const outcomes = { ok: 0, failed: 0 };
    for (let seed = 1; seed <= 400; seed++) {
      const r = rng(seed);
      const pick = <T>(xs: T[]): T => xs[int(r, xs.length)] as T;
      const contentType = pick(["application/grpc", "application/grpc+proto", "application/grpc", "Application/GRPC", "application/grpc+json", "application/grpc; charset=utf-8", "text/plain"]);
      const statusCode = int(r, 6) === 0 ? pick([204, 400, 503]) : 200;
      const head: Record<string, string | string[]> = {};
      const trail: Record<string, string | string[]> = {};
      if (int(r, 6) === 0) head["grpc-status"] = pick(["0", "3", "x"]);
      if (int(r, 8) === 0) head["grpc-status-details-bin"] = details(pick([0, Code.Unknown, Code.NotFound]));
      if (int(r, 8) === 0) head["grpc-encoding"] = pick(["identity", "gzip", "br"]);
      const status = pick(["0", "0", "0", "5", "00", " 0", "", "99"]);
      if (int(r, 8)) trail["grpc-status"] = status;
      if (int(r, 3) === 0) trail["grpc-message"] = pick(["boom", "%20spaced", ""]);
      if (int(r, 6) === 0) trail["grpc-status-details-bin"] = details(pick([0, Code.Unknown, Code.Unavailable]));
      if (int(r, 10) === 0) trail["x-many"] = ["a", "b"];
      const body = int(r, 6) === 0 ? Buffer.alloc(0) : envelope(valid);
      const trailersOnly = int(r, 8) === 0;
      srv.answer = (s) => {
        if (trailersOnly) {
          s.respond({ ":status": statusCode, "content-type": contentType, ...head, ...trail }, { endStream: true });
          return;
        }
        s.respond({ ":status": statusCode, "content-type": contentType, ...head }, { waitForTrailers: true });
        s.once("wantTrailers", () => s.sendTrailers(trail));
        s.end(body);
      };
      const mine = await unary(DeviceService.method.runShell, undefined, 20_000, undefined, { command: "x" }).then((res) => res.message, (e: unknown) => ConnectError.from(e));
      const theirs = await connect.runShell({ command: "x" }, { timeoutMs: 20_000 }).then((m) => m, (e: unknown) => ConnectError.from(e));
      const what = `seed ${seed}: ${JSON.stringify({ statusCode, contentType, head, trail, trailersOnly, body: body.length })}`;
      if (theirs instanceof ConnectError) {
        expect(mine, what).toBeInstanceOf(ConnectError);
        expect((mine as ConnectError).code, `${what}: ${(mine as ConnectError).message} against ${theirs.message}`).toBe(theirs.code);
        outcomes.failed++;
      } else {
        expect(mine, what).not.toBeInstanceOf(ConnectError);
        // Bytes fields come as Buffer slices from one, Uint8Array from the other: compared encoded.
        expect(Buffer.from(toBinary(RunShellResponseSchema, mine as never)).equals(toBinary(RunShellResponseSchema, theirs)), what).toBe(true);
        outcomes.ok++;
      }
    }
    sessionManager.abort();
    expect(outcomes.ok).toBeGreaterThan(50);
    expect(outcomes.failed).toBeGreaterThan(50);
  });
});
