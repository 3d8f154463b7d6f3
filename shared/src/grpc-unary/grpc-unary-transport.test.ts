/**
 * farm's hand-framed gRPC unary client against real servers in this
 * process: connect-node (the coordinator's framework) for the envelope,
 * errors and their farm details, deadlines and cancellation; a bare
 * node:http2 server for what connect-node never sends (trailers-only
 * answers, HTTP errors, compressed or oversized messages, a dropped
 * connection mid-answer). Every wait is on an event.
 */
import { gzipSync } from "node:zlib";
import { constants, createServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { Code, ConnectError, createClient, type ConnectRouter, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter, Http2SessionManager } from "@connectrpc/connect-node";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { create, toBinary } from "@bufbuild/protobuf";
import { DeviceService, RunShellResponseSchema } from "../gen/farm/v1/device_service_pb.js";
import { ErrorDetailSchema } from "../gen/farm/v1/error_pb.js";
import { Errors, farmError, toErrorReport } from "../errors.js";
import { farmTransport } from "../farm-transport.js";
import { grpcUnary } from "./grpc-unary-transport.js";

let server: Http2Server | undefined;
const sessions: ServerHttp2Session[] = [];
afterEach(async () => {
  for (const s of sessions.splice(0)) s.destroy();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

async function listen(s: Http2Server): Promise<string> {
  server = s;
  s.on("session", (x) => {
    sessions.push(x);
    // A client that goes away with an error code (the tests' session managers, aborted) is no error of the server's.
    x.on("error", () => {});
  });
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

type Handlers = Partial<Parameters<ConnectRouter["service"]>[1]>;

/** A connect-node server for DeviceService with the given handlers. */
function serveConnect(handlers: { runShell?: (req: { command: string }, ctx: HandlerContext) => unknown }): Promise<string> {
  return listen(createServer(connectNodeAdapter({ routes: (r: ConnectRouter) => r.service(DeviceService, handlers as Handlers) })));
}

/** A bare HTTP/2 server: `onStream` answers each request as it likes. */
function serveBare(onStream: (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void): Promise<string> {
  const s = createServer();
  s.on("stream", (stream, headers) => {
    // A stream the client resets is no error of the server's.
    stream.on("error", () => {});
    onStream(stream, headers);
  });
  return listen(s);
}

const envelope = (data: Uint8Array, flags = 0) => {
  const b = Buffer.alloc(data.length + 5);
  b[0] = flags;
  b.writeUInt32BE(data.length, 1);
  b.set(data, 5);
  return b;
};
const shellAnswer = (stdout: string) => envelope(toBinary(RunShellResponseSchema, create(RunShellResponseSchema, { exitCode: 0, stdout: Buffer.from(stdout) })));

const failure = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => ConnectError.from(e));
const target = { serial: "S1" };

describe("the hand-framed unary client against connect-node", () => {
  it("sends the message, the interceptors' headers and the timeout, and shows the answer's headers and trailers to interceptors", async () => {
    let seen: { command: string; auth: string | null; lease: string | null; timeout: string | null; ct: string | null } | undefined;
    const url = await serveConnect({
      runShell: (req, ctx) => {
        seen = { command: req.command, auth: ctx.requestHeader.get("authorization"), lease: ctx.requestHeader.get("x-farm-lease"), timeout: ctx.requestHeader.get("grpc-timeout"), ct: ctx.requestHeader.get("content-type") };
        ctx.responseHeader.set("x-answer", "h");
        ctx.responseTrailer.set("x-after", "t");
        return { exitCode: 3, stdout: Buffer.from("héllo") };
      },
    });
    let observed: { header?: string | null; trailer?: string | null } = {};
    const watch: Interceptor = (next) => async (req) => {
      const res = await next(req);
      observed = { header: res.header.get("x-answer"), trailer: res.trailer.get("x-after") };
      return res;
    };
    const client = createClient(DeviceService, farmTransport({ url, token: "tok", headers: { "x-farm-lease": "L1" }, interceptors: [watch] }));
    const res = await client.runShell({ target, command: "echo héllo" }, { timeoutMs: 5_000 });
    expect(res.exitCode).toBe(3);
    expect(Buffer.from(res.stdout).toString()).toBe("héllo");
    expect(seen).toMatchObject({ command: "echo héllo", auth: "Bearer tok", lease: "L1", ct: "application/grpc+proto" });
    // The caller's own timeout on the wire, not the longer local wait.
    expect(seen?.timeout).toBe("5000m");
    expect(observed).toEqual({ header: "h", trailer: "t" });
  });

  it("decodes a farm error with its detail, a percent-encoded message and the trailers as metadata", async () => {
    const message = "refused: 100% of ünïcode\nand a second line";
    const url = await serveConnect({
      runShell: (_req, ctx) => {
        ctx.responseTrailer.set("x-why", "because");
        throw farmError(Errors.LEASE_REQUIRED, message, "lease", { dispatched: false, ambiguous: false });
      },
    });
    const err = await failure(createClient(DeviceService, farmTransport({ url, token: "t" })).runShell({ target, command: "true" }));
    expect(err?.code).toBe(Code.FailedPrecondition);
    expect(err?.rawMessage).toBe(message);
    expect(err?.findDetails(ErrorDetailSchema)[0]).toMatchObject({ code: "LEASE_REQUIRED", field: "lease" });
    expect(toErrorReport(err)).toMatchObject({ code: "LEASE_REQUIRED", field: "lease", dispatched: false });
    expect(err?.metadata.get("x-why")).toBe("because");
  });

  it("reads every status code connect-node sends, with and without details", async () => {
    let code = Code.Canceled;
    const url = await serveConnect({
      runShell: () => {
        throw new ConnectError(`status ${code}`, code);
      },
    });
    const client = createClient(DeviceService, farmTransport({ url, token: "t" }));
    for (; code <= Code.Unauthenticated; code++) {
      const err = await failure(client.runShell({ target, command: "true" }));
      expect([err?.code, err?.rawMessage]).toEqual([code, `status ${code}`]);
    }
  });

  it("cancels: the caller's abort ends the call with Canceled and the server sees its stream reset", async () => {
    let serverAborted: () => void = () => {};
    const aborted = new Promise<void>((r) => (serverAborted = r));
    let started: () => void = () => {};
    const running = new Promise<void>((r) => (started = r));
    const url = await serveConnect({
      runShell: (_req, ctx) =>
        new Promise(() => {
          ctx.signal.addEventListener("abort", () => serverAborted(), { once: true });
          started();
        }),
    });
    const abort = new AbortController();
    const call = failure(createClient(DeviceService, farmTransport({ url, token: "t" })).runShell({ target, command: "sleep" }, { signal: abort.signal }));
    await running;
    abort.abort();
    expect((await call)?.code).toBe(Code.Canceled);
    await aborted;
  });

  it("gives up at its local deadline with DeadlineExceeded and resets the stream", async () => {
    let serverAborted: () => void = () => {};
    const aborted = new Promise<void>((r) => (serverAborted = r));
    const url = await serveConnect({
      runShell: (_req, ctx) => new Promise(() => ctx.signal.addEventListener("abort", () => serverAborted(), { once: true })),
    });
    const sessionManager = new Http2SessionManager(url);
    const unary = grpcUnary({ baseUrl: url, sessions: sessionManager });
    // No timeout on the wire from this bare use; only the local deadline ends the call.
    const err = await failure(unary(DeviceService.method.runShell, undefined, 200, undefined, { target, command: "sleep" }));
    expect(err?.code).toBe(Code.DeadlineExceeded);
    await aborted;
    sessionManager.abort();
  });

  it("carries a large message each way", async () => {
    const big = "x".repeat(6 * 1024 * 1024);
    const url = await serveConnect({ runShell: (req) => ({ stdout: Buffer.from(req.command + req.command) }) });
    const res = await createClient(DeviceService, farmTransport({ url, token: "t" })).runShell({ target, command: big });
    expect(res.stdout.length).toBe(2 * big.length);
  });

  it("reads an unknown method as Unimplemented", async () => {
    const url = await serveConnect({});
    expect((await failure(createClient(DeviceService, farmTransport({ url, token: "t" })).runShell({ target, command: "true" })))?.code).toBe(Code.Unimplemented);
  });

  it("loses a call whose connection the server drops mid-call, and the next call opens a new one", async () => {
    let calls = 0;
    let held: () => void = () => {};
    const holding = new Promise<void>((r) => (held = r));
    const url = await serveConnect({
      runShell: () => {
        calls++;
        if (calls === 1) {
          held();
          return new Promise(() => {});
        }
        return { exitCode: 7 };
      },
    });
    const client = createClient(DeviceService, farmTransport({ url, token: "t" }));
    const first = failure(client.runShell({ target, command: "hang" }));
    await holding;
    for (const s of sessions.splice(0)) s.destroy();
    const err = await first;
    expect(err).toBeInstanceOf(ConnectError);
    expect(err?.findDetails(ErrorDetailSchema)).toEqual([]);
    expect(err?.rawMessage).toMatch(/ECONNRESET|socket hang up|stream closed|GOAWAY|session closed/i);
    expect((await client.runShell({ target, command: "again" })).exitCode).toBe(7);
  });

  it("keeps working after the server sends GOAWAY", async () => {
    const url = await serveConnect({ runShell: () => ({ exitCode: 1 }) });
    const client = createClient(DeviceService, farmTransport({ url, token: "t" }));
    expect((await client.runShell({ target, command: "a" })).exitCode).toBe(1);
    const closed = sessions.map((s) => new Promise((r) => s.once("close", r)));
    for (const s of sessions.splice(0)) s.close();
    await Promise.all(closed);
    expect((await client.runShell({ target, command: "b" })).exitCode).toBe(1);
  });
});

describe("the hand-framed unary client against a bare HTTP/2 server", () => {
  const call = async (url: string, opts: { readMaxBytes?: number } = {}) => {
    const sessionManager = new Http2SessionManager(url);
    try {
      return await grpcUnary({ baseUrl: url, sessions: sessionManager, ...opts })(DeviceService.method.runShell, undefined, 30_000, undefined, { target, command: "x" });
    } finally {
      sessionManager.abort();
    }
  };

  it("reads a trailers-only error, details included", async () => {
    const detailed = farmError(Errors.DEVICE_OFFLINE, "gone: 50%", "device");
    const url = await serveBare((stream) => {
      stream.respond(
        { ":status": 200, "content-type": "application/grpc", "grpc-status": String(Code.Unavailable), "grpc-message": encodeURIComponent(detailed.rawMessage), "grpc-status-details-bin": statusBin(detailed) },
        { endStream: true },
      );
    });
    const err = await failure(call(url));
    expect(err?.code).toBe(Code.Unavailable);
    expect(toErrorReport(err)).toMatchObject({ code: "DEVICE_OFFLINE", field: "device", message: "gone: 50%" });
  });

  it("maps an HTTP status other than 200 as gRPC does", async () => {
    const statuses: Record<number, Code> = { 404: Code.Unimplemented, 503: Code.Unavailable, 401: Code.Unauthenticated, 500: Code.Unknown };
    let status = 0;
    const url = await serveBare((stream) => stream.respond({ ":status": status }, { endStream: true }));
    for (const [s, code] of Object.entries(statuses)) {
      status = Number(s);
      expect((await failure(call(url)))?.code).toBe(code);
    }
  });

  it("offers gzip and inflates a gzipped answer; refuses another encoding and an answer that inflates past its limit", async () => {
    const answer = toBinary(RunShellResponseSchema, create(RunShellResponseSchema, { stdout: new TextEncoder().encode("x".repeat(50_000)) }));
    let encoding = "gzip";
    let body: Uint8Array = gzipSync(answer);
    const offered: unknown[] = [];
    const url = await serveBare((stream, headers) => {
      offered.push(headers["grpc-accept-encoding"]);
      stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-encoding": encoding }, { waitForTrailers: true });
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(envelope(body, 1));
    });
    const res = await call(url);
    expect(new TextDecoder().decode(res.message.stdout)).toBe("x".repeat(50_000));
    expect(offered).toEqual(["gzip"]);

    encoding = "br";
    const other = await failure(call(url));
    expect(other?.code).toBe(Code.Internal);
    expect(other?.rawMessage).toMatch(/compressed message with encoding "br"/);

    // 1 MiB of zeros gzips to about 1 KiB: under the prefix's limit, over it inflated.
    encoding = "gzip";
    body = gzipSync(new Uint8Array(1024 * 1024));
    const bomb = await failure(call(url, { readMaxBytes: 64 * 1024 }));
    expect(bomb?.code).toBe(Code.ResourceExhausted);
    expect(bomb?.rawMessage).toMatch(/after decompression/);
  });

  it("refuses an answer over its size limit from the length prefix, before the body arrives, and resets the stream", async () => {
    let closed: (rstCode: number) => void = () => {};
    const serverClosed = new Promise<number>((r) => (closed = r));
    const url = await serveBare((stream) => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" });
      // Announces 1 GiB and sends 10 bytes of it, then holds the stream open: only the prefix can end the call.
      const head = Buffer.alloc(15);
      head.writeUInt32BE(1024 * 1024 * 1024, 1);
      stream.write(head);
      stream.on("close", () => closed(stream.rstCode));
    });
    const sessionManager = new Http2SessionManager(url);
    const err = await failure(grpcUnary({ baseUrl: url, sessions: sessionManager, readMaxBytes: 1024 })(DeviceService.method.runShell, undefined, 30_000, undefined, { target, command: "x" }));
    expect(err?.code).toBe(Code.ResourceExhausted);
    expect(err?.rawMessage).toMatch(/1073741824.*1024/);
    expect(await serverClosed).toBe(constants.NGHTTP2_CANCEL);
    sessionManager.abort();
  });

  it("refuses a second message, a missing status and a body cut short", async () => {
    const answers = [
      (s: ServerHttp2Stream) => end(s, Buffer.concat([shellAnswer("a"), shellAnswer("b")]), { "grpc-status": "0" }),
      (s: ServerHttp2Stream) => end(s, shellAnswer("a"), {}),
      (s: ServerHttp2Stream) => end(s, shellAnswer("abcdef").subarray(0, 8), { "grpc-status": "0" }),
      (s: ServerHttp2Stream) => end(s, Buffer.alloc(0), { "grpc-status": "0" }),
    ];
    let i = 0;
    const url = await serveBare((s) => answers[i++]?.(s));
    const codes = [];
    for (let k = 0; k < answers.length; k++) codes.push((await failure(call(url)))?.code);
    expect(codes).toEqual([Code.Unimplemented, Code.Internal, Code.Internal, Code.Unimplemented]);
  });

  it("reads an answer split into one-byte DATA frames", async () => {
    const url = await serveBare((s) => {
      s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      s.once("wantTrailers", () => s.sendTrailers({ "grpc-status": "0" }));
      const bytes = shellAnswer("split");
      for (let k = 0; k < bytes.length; k++) s.write(bytes.subarray(k, k + 1));
      s.end();
    });
    expect(Buffer.from((await call(url)).message.stdout).toString()).toBe("split");
  });
});

function end(s: ServerHttp2Stream, body: Buffer, trailers: Record<string, string>): void {
  s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
  s.once("wantTrailers", () => s.sendTrailers(trailers));
  s.end(body);
}

/** grpc-status-details-bin of a ConnectError, as a gRPC server writes it. */
function statusBin(err: ConnectError): string {
  const h = new Headers();
  // connect's own gRPC trailer writer: the encoding this client must read.
  setTrailerStatus(h, err);
  return h.get("grpc-status-details-bin") as string;
}
