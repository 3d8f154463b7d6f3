/**
 * The stream fast path on its own, in a bare node:http2 server: real gRPC
 * clients (@grpc/grpc-js, connect-node, farm's hand-framed one) run bidi,
 * server- and client-streaming calls through it, and both directions hold
 * a fast peer by flow control when the other side stops reading (nothing
 * piles up in the server). Every wait is on an event.
 */
import { connect, constants, createServer, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, createContextValues, createMethodImplSpec, type HandlerContext } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createLogger } from "@farm/shared/log";
import { farmTransport } from "@farm/shared/farm-transport";
import { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { OpenShellRequestSchema, OpenShellResponseSchema, ShellService, type OpenShellRequest, type OpenShellResponse } from "@farm/shared/gen/farm/v1/shell_service_pb";
import { grpcEnvelope } from "@farm/shared/testing/grpc-envelope";
import { grpcStreamFastPath } from "./grpc-stream-fast-path.js";
import { FastPathRoutes } from "./fast-path-routes.js";

let server: Http2Server | undefined;
const sessions: ServerHttp2Session[] = [];
afterEach(async () => {
  for (const s of sessions.splice(0)) s.destroy();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

/** An implementation as Connect takes it; typed loosely here, as each test's own generator. */
type Impl = unknown;

/** A server with only the fast path: anything it leaves to `next` is a 404 the test would see. */
async function serve(impls: { openShell?: Impl; watchShell?: Impl; uploadBlob?: Impl }, readMaxBytes = 1024 * 1024): Promise<{ url: string; stats: { fastStreams: number } }> {
  const routes = new FastPathRoutes("stream");
  if (impls.openShell) routes.add(createMethodImplSpec(ShellService.method.openShell, impls.openShell as never), { readMaxBytes });
  if (impls.watchShell) routes.add(createMethodImplSpec(ShellService.method.watchShell, impls.watchShell as never), { readMaxBytes });
  if (impls.uploadBlob) routes.add(createMethodImplSpec(BlobService.method.uploadBlob, impls.uploadBlob as never), { readMaxBytes });
  const stats = { fastStreams: 0 };
  const handler = grpcStreamFastPath((_req, res) => {
    res.writeHead(404);
    res.end();
  }, { routes, interceptors: [], contextValues: () => createContextValues(), log: createLogger({ level: "error" }), stats });
  server = createServer(handler as never);
  server.on("session", (x) => {
    sessions.push(x);
    x.on("error", () => {});
  });
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, stats };
}

const stdin = (s: string) => create(OpenShellRequestSchema, { kind: { case: "stdin", value: Buffer.from(s) } });
const text = (m: OpenShellResponse) => (m.kind.case === "output" ? Buffer.from(m.kind.value).toString() : m.kind.case === "exitCode" ? `exit ${m.kind.value}` : `id ${m.kind.value}`);

async function* echo(reqs: AsyncIterable<OpenShellRequest>, ctx: HandlerContext): AsyncGenerator<OpenShellResponse> {
  ctx.responseHeader.set("x-answer", "h");
  for await (const r of reqs) if (r.kind.case === "stdin") yield create(OpenShellResponseSchema, { kind: { case: "output", value: r.kind.value } });
  ctx.responseTrailer.set("x-after", "t");
  yield create(OpenShellResponseSchema, { kind: { case: "exitCode", value: 7 } });
}

async function* lines(...xs: string[]): AsyncGenerator<OpenShellRequest> {
  for (const x of xs) yield stdin(x);
}

const failure = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => ConnectError.from(e));

describe("the stream fast path", () => {
  it("serves connect-node's and farm's clients: bidi, server- and client-streaming, headers and trailers", async () => {
    const { url, stats } = await serve({
      openShell: echo,
      async *watchShell(req: { start?: { term: string } }) {
        yield { kind: { case: "opened", value: { shellId: "s", actionId: req.start?.term ?? "" } } };
      },
      async uploadBlob(reqs: AsyncIterable<{ part?: { kind: { case: string; value?: unknown } } }>) {
        let n = 0;
        for await (const r of reqs) n += r.part?.kind.case === "chunk" ? (r.part.kind.value as Uint8Array).length : 0;
        return { blobId: `bytes-${n}` };
      },
    });
    for (const transport of [createGrpcTransport({ baseUrl: url }), farmTransport({ url, token: "t" })]) {
      let header: Headers | undefined;
      let trailer: Headers | undefined;
      const out: string[] = [];
      for await (const m of createClient(ShellService, transport).openShell(lines("a", "b"), { onHeader: (h) => (header = h), onTrailer: (t) => (trailer = t) })) out.push(text(m));
      expect(out).toEqual(["a", "b", "exit 7"]);
      expect([header?.get("x-answer"), trailer?.get("x-after")]).toEqual(["h", "t"]);
      const watched: string[] = [];
      for await (const m of createClient(ShellService, transport).watchShell({ start: { term: "vt" } })) watched.push(m.kind.case === "opened" ? m.kind.value.actionId : "?");
      expect(watched).toEqual(["vt"]);
      const parts = (async function* () {
        for (let i = 0; i < 10; i++) yield { part: { kind: { case: "chunk" as const, value: new Uint8Array(50_000) } } };
      })();
      expect((await createClient(BlobService, transport).uploadBlob(parts)).blobId).toBe("bytes-500000");
    }
    expect(stats.fastStreams).toBe(6);
  });

  it("answers bytes-only messages of every size intact, written beside their head (bytes-envelope.ts), to connect-node's, farm's and grpc-js's clients", async () => {
    const { url } = await serve({ openShell: echo }, 4 * 1024 * 1024);
    const sizes = [0, 1, 127, 16_383, 16_384, 300_001, 1024 * 1024 + 3];
    const payloads = sizes.map((n, i) => Buffer.from(Array.from({ length: n }, (_, j) => (j * 7 + i) & 0xff)));
    const requests = async function* () {
      for (const p of payloads) yield create(OpenShellRequestSchema, { kind: { case: "stdin", value: p } });
    };
    for (const transport of [createGrpcTransport({ baseUrl: url }), farmTransport({ url, token: "t" })]) {
      const got: Uint8Array[] = [];
      for await (const m of createClient(ShellService, transport).openShell(requests())) if (m.kind.case === "output") got.push(m.kind.value);
      expect(got.map((b) => Buffer.from(b).toString("base64"))).toEqual(payloads.map((p) => p.toString("base64")));
    }
    const client = new grpc.Client(new URL(url).host, grpc.credentials.createInsecure(), { "grpc.max_receive_message_length": 4 * 1024 * 1024 });
    const call = client.makeBidiStreamRequest(
      "/farm.v1.ShellService/OpenShell",
      (m: OpenShellRequest) => Buffer.from(toBinary(OpenShellRequestSchema, m)),
      (b: Buffer) => fromBinary(OpenShellResponseSchema, b),
    );
    const got: Uint8Array[] = [];
    call.on("data", (m: OpenShellResponse) => m.kind.case === "output" && got.push(m.kind.value));
    const ended = new Promise<void>((resolve, reject) => {
      call.on("end", resolve);
      call.on("error", reject);
    });
    for (const p of payloads) call.write(create(OpenShellRequestSchema, { kind: { case: "stdin", value: p } }));
    call.end();
    await ended;
    client.close();
    expect(got.map((b) => Buffer.from(b).toString("base64"))).toEqual(payloads.map((p) => p.toString("base64")));
  });

  it("serves @grpc/grpc-js a bidi call and its error status with metadata", async () => {
    const { url } = await serve({
      async *openShell(reqs: AsyncIterable<OpenShellRequest>, ctx: HandlerContext) {
        for await (const r of reqs) if (r.kind.case === "stdin") yield create(OpenShellResponseSchema, { kind: { case: "output", value: r.kind.value } });
        ctx.responseTrailer.set("x-after", "t");
        throw new ConnectError("the shell broke", Code.DataLoss);
      },
    });
    const client = new grpc.Client(new URL(url).host, grpc.credentials.createInsecure());
    const call = client.makeBidiStreamRequest(
      "/farm.v1.ShellService/OpenShell",
      (m: OpenShellRequest) => Buffer.from(toBinary(OpenShellRequestSchema, m)),
      (b: Buffer) => fromBinary(OpenShellResponseSchema, b),
    );
    const seen: string[] = [];
    const ended = new Promise<grpc.ServiceError>((resolve) => call.on("error", resolve));
    call.on("data", (m: OpenShellResponse) => seen.push(text(m)));
    call.write(stdin("x"));
    call.write(stdin("y"));
    call.end();
    const err = await ended;
    expect(seen).toEqual(["x", "y"]);
    expect(err.code).toBe(grpc.status.DATA_LOSS);
    expect(err.details).toBe("the shell broke");
    expect(err.metadata.get("x-after")).toEqual(["t"]);
    client.close();
  });

  it("refuses a request message over the method's cap from its length prefix, while the caller is still sending", async () => {
    const { url } = await serve({ openShell: echo }, 1024);
    const session = connect(url);
    const req = session.request({ ":method": "POST", ":path": "/farm.v1.ShellService/OpenShell", "content-type": "application/grpc", te: "trailers" });
    req.on("error", () => {});
    const status = new Promise<unknown>((resolve) => req.on("trailers", (t) => resolve(t["grpc-status"])));
    req.resume();
    req.write(grpcEnvelope(0, new Uint8Array(10), 1024 * 1024));
    // The answer comes before the body's end (the coordinator's request gate then resets the stream).
    expect(await status).toBe(String(Code.ResourceExhausted));
    req.close(constants.NGHTTP2_CANCEL);
    session.close();
  });

  it("ends the implementation's work when the caller resets the stream", async () => {
    let aborted: (() => void) | undefined;
    const seen = new Promise<void>((r) => (aborted = r));
    let first: (() => void) | undefined;
    const started = new Promise<void>((r) => (first = r));
    const { url } = await serve({
      async *openShell(_reqs: AsyncIterable<OpenShellRequest>, ctx: HandlerContext) {
        ctx.signal.addEventListener("abort", () => aborted?.());
        first?.();
        await new Promise(() => {});
        yield create(OpenShellResponseSchema);
      },
    });
    const session = connect(url);
    const req = session.request({ ":method": "POST", ":path": "/farm.v1.ShellService/OpenShell", "content-type": "application/grpc", te: "trailers" });
    req.on("error", () => {});
    req.write(grpcEnvelope(0, toBinary(OpenShellRequestSchema, stdin("x"))));
    await started;
    req.close(constants.NGHTTP2_CANCEL);
    await seen;
    session.close();
  });

  it("holds a caller that sends faster than the implementation reads (request side)", async () => {
    let taken = 0;
    const TOTAL = 256 * 1024 * 1024;
    const { url } = await serve({
      async *openShell(reqs: AsyncIterable<OpenShellRequest>) {
        // Takes one message, then reads nothing more.
        for await (const _ of reqs) {
          taken++;
          await new Promise(() => {});
        }
        yield create(OpenShellResponseSchema);
      },
      async *watchShell() {
        yield { kind: { case: "exitCode", value: 0 } };
      },
    });
    const session = connect(url);
    const req = session.request({ ":method": "POST", ":path": "/farm.v1.ShellService/OpenShell", "content-type": "application/grpc", te: "trailers" });
    req.on("error", () => {});
    let written = 0;
    const chunk = grpcEnvelope(0, toBinary(OpenShellRequestSchema, stdin("z".repeat(1024))));
    const pump = () => {
      while (written < TOTAL) {
        written += chunk.length;
        if (!req.write(chunk)) return void req.once("drain", pump);
      }
    };
    pump();
    // A call on the same connection, answered by the server's JavaScript: it is read after every DATA frame sent before it, so its answer comes after whatever window those freed.
    const roundTrip = async () => {
      const r = session.request({ ":method": "POST", ":path": "/farm.v1.ShellService/WatchShell", "content-type": "application/grpc", te: "trailers" });
      r.on("error", () => {});
      r.resume();
      r.end(grpcEnvelope(0, new Uint8Array(0)));
      await new Promise((resolve) => r.on("close", resolve));
    };
    for (let before = -1; written !== before && written < TOTAL;) {
      before = written;
      for (let i = 0; i < 3; i++) await roundTrip();
    }
    expect(taken).toBe(1);
    // The server's stream window (Node's default 64 KiB here) + the inbox's high water (256 KiB) + buffers: far below what was offered.
    expect(written).toBeLessThan(4 * 1024 * 1024);
    req.close(constants.NGHTTP2_CANCEL);
    session.close();
  });

  it("holds the implementation when the caller reads nothing (answer side): its generator waits", async () => {
    let produced = 0;
    const { url } = await serve({
      async *watchShell() {
        for (;;) {
          produced++;
          yield { kind: { case: "output", value: new Uint8Array(1024) } };
        }
      },
    });
    const session = connect(url);
    const req = session.request({ ":method": "POST", ":path": "/farm.v1.ShellService/WatchShell", "content-type": "application/grpc", te: "trailers" });
    req.on("error", () => {});
    req.end(grpcEnvelope(0, new Uint8Array(0)));
    // Never read: the stream stays paused, so only the window's worth is taken from the server.
    req.pause();
    await new Promise((r) => req.once("response", r));
    const ping = () => new Promise<void>((resolve) => session.ping(() => resolve()));
    for (let before = -1; produced !== before && produced < 1_000_000;) {
      before = produced;
      for (let i = 0; i < 3; i++) await ping();
    }
    // Node's 64 KiB client window and the server's write buffer: a few hundred 1 KiB messages, not a million.
    expect(produced).toBeLessThan(2_000);
    req.close(constants.NGHTTP2_CANCEL);
    session.close();
  });
});
