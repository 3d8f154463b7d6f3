/**
 * farm's hand-framed gRPC streaming client against real servers in this
 * process: connect-node (the coordinator's framework) and @grpc/grpc-js for
 * bidi, server- and client-streaming calls, errors with their farm
 * details, deadlines and cancellation; a bare node:http2 server for what
 * those never send (trailers-only answers, oversized or cut messages,
 * messages split byte by byte, resets, a reader that stops reading).
 * Every wait is on an event.
 */
import { constants, createServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { connectNodeAdapter, Http2SessionManager } from "@connectrpc/connect-node";
import { BlobService } from "../gen/farm/v1/blob_service_pb.js";
import { OpenShellRequestSchema, OpenShellResponseSchema, ShellService, type OpenShellRequest, type OpenShellResponse } from "../gen/farm/v1/shell_service_pb.js";
import { Errors, farmError, toErrorReport } from "../errors.js";
import { grpcEnvelope } from "../testing/grpc-envelope.js";
import { grpcStream } from "./grpc-stream-transport.js";

let server: Http2Server | undefined;
let grpcServer: grpc.Server | undefined;
const sessions: ServerHttp2Session[] = [];
const managers: Http2SessionManager[] = [];
afterEach(async () => {
  for (const m of managers.splice(0)) m.abort();
  for (const s of sessions.splice(0)) s.destroy();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
  grpcServer?.forceShutdown();
  grpcServer = undefined;
});

async function listen(s: Http2Server): Promise<string> {
  server = s;
  s.on("session", (x) => {
    sessions.push(x);
    x.on("error", () => {});
  });
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

/** Handlers typed loosely: each test's own generators for one service's methods. */
type Handlers = Record<string, unknown>;

function serveConnect(service: typeof ShellService | typeof BlobService, handlers: Handlers): Promise<string> {
  return listen(createServer(connectNodeAdapter({ routes: (r: ConnectRouter) => r.service(service as typeof ShellService, handlers as never) })));
}

function serveBare(onStream: (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void): Promise<string> {
  const s = createServer();
  s.on("stream", (stream, headers) => {
    stream.on("error", () => {});
    onStream(stream, headers);
  });
  return listen(s);
}

/** A transport whose streams are hand-framed (unary is not used here). */
function transport(url: string, highWaterBytes?: number) {
  const sessions = new Http2SessionManager(url);
  managers.push(sessions);
  const stream = grpcStream({ baseUrl: url, sessions, ...(highWaterBytes ? { highWaterBytes } : {}) });
  return { unary: () => Promise.reject(new Error("not here")), stream } as unknown as Parameters<typeof createClient>[1];
}

const shell = (url: string, highWaterBytes?: number) => createClient(ShellService, transport(url, highWaterBytes));
const stdin = (s: string) => create(OpenShellRequestSchema, { kind: { case: "stdin", value: Buffer.from(s) } });
const output = (s: string) => grpcEnvelope(0, toBinary(OpenShellResponseSchema, create(OpenShellResponseSchema, { kind: { case: "output", value: Buffer.from(s) } })));
const text = (m: OpenShellResponse) => (m.kind.case === "output" ? Buffer.from(m.kind.value).toString() : m.kind.case === "exitCode" ? `exit ${m.kind.value}` : `id ${m.kind.value}`);

async function* lines(...xs: string[]): AsyncGenerator<OpenShellRequest> {
  for (const x of xs) yield stdin(x);
}

async function collect(it: AsyncIterable<OpenShellResponse>): Promise<string[]> {
  const out: string[] = [];
  for await (const m of it) out.push(text(m));
  return out;
}

/** Promise.withResolvers (Node 22) for Node 20. */
function resolvers(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {};
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** A request stream that stays open until the test ends it. */
function openRequests(): { requests: AsyncGenerator<OpenShellRequest>; end: () => void } {
  const ended = resolvers();
  return {
    requests: (async function* () {
      await ended.promise;
    })(),
    end: ended.resolve,
  };
}

const failure = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => ConnectError.from(e));

/** An echo shell: each stdin comes back as output, then an exit code at the request's end. */
async function* echo(reqs: AsyncIterable<OpenShellRequest>, ctx: HandlerContext): AsyncGenerator<OpenShellResponse> {
  ctx.responseHeader.set("x-answer", "h");
  for await (const r of reqs) if (r.kind.case === "stdin") yield create(OpenShellResponseSchema, { kind: { case: "output", value: r.kind.value } });
  ctx.responseTrailer.set("x-after", "t");
  yield create(OpenShellResponseSchema, { kind: { case: "exitCode", value: 7 } });
}

describe("the hand-framed streaming client against connect-node", () => {
  it("runs a bidi call both ways and shows the headers and trailers", async () => {
    const url = await serveConnect(ShellService, { openShell: echo });
    let header: Headers | undefined;
    let trailer: Headers | undefined;
    const out = await collect(shell(url).openShell(lines("a", "bé", ""), { onHeader: (h) => (header = h), onTrailer: (t) => (trailer = t) }));
    expect(out).toEqual(["a", "bé", "", "exit 7"]);
    expect(header?.get("x-answer")).toBe("h");
    expect(trailer?.get("x-after")).toBe("t");
  });

  it("sends large messages intact", async () => {
    const url = await serveConnect(ShellService, { openShell: echo });
    const big = Buffer.from(Array.from({ length: 300_000 }, (_, i) => String.fromCharCode(97 + (i % 26))).join(""));
    const out = await collect(shell(url).openShell(lines(big.toString(), "small", big.toString().slice(0, 20_000))));
    expect(out.map((x) => x.length)).toEqual([300_000, 5, 20_000, 6]);
    expect(out[0]).toBe(big.toString());
    expect(out[2]).toBe(big.toString().slice(0, 20_000));
  });

  it("answers each message as it is sent (a true bidi stream, not a buffered request)", async () => {
    const url = await serveConnect(ShellService, { openShell: echo });
    const queue: ((m: OpenShellRequest | undefined) => void)[] = [];
    const requests = (async function* () {
      for (;;) {
        const m = await new Promise<OpenShellRequest | undefined>((r) => queue.push(r));
        if (!m) return;
        yield m;
      }
    })();
    const it = shell(url).openShell(requests)[Symbol.asyncIterator]();
    const sent = async (m: OpenShellRequest | undefined) => {
      // The transport asks for the next request message once it has sent the one before.
      while (queue.length === 0) await new Promise((r) => setImmediate(r));
      queue.shift()?.(m);
    };
    for (const word of ["one", "two", "three"]) {
      const next = it.next();
      await sent(stdin(word));
      expect(text((await next).value as OpenShellResponse)).toBe(word);
    }
    const end = it.next();
    await sent(undefined);
    expect(text((await end).value as OpenShellResponse)).toBe("exit 7");
    expect((await it.next()).done).toBe(true);
  });

  it("delivers an error after messages with its code and farm details", async () => {
    const url = await serveConnect(ShellService, {
      async *openShell() {
        yield create(OpenShellResponseSchema, { kind: { case: "actionId", value: "A1" } });
        throw farmError(Errors.DEVICE_BUSY, "held by someone", "serial");
      },
    });
    const seen: string[] = [];
    const err = await failure((async () => {
      for await (const m of shell(url).openShell(lines("x"))) seen.push(text(m));
    })());
    expect(seen).toEqual(["id A1"]);
    expect(err?.code).toBe(Code.Unavailable);
    expect(toErrorReport(err).code).toBe("DEVICE_BUSY");
  });

  it("runs server-streaming and client-streaming calls", async () => {
    const url = await serveConnect(ShellService, {
      async *watchShell(req: { start?: { term: string } }) {
        yield { kind: { case: "opened", value: { shellId: "s", actionId: req.start?.term ?? "" } } };
        yield { kind: { case: "exitCode", value: 0 } };
      },
    });
    const got: string[] = [];
    for await (const m of shell(url).watchShell({ start: { term: "xterm" } })) got.push(m.kind.case === "opened" ? m.kind.value.actionId : String(m.kind.value));
    expect(got).toEqual(["xterm", "0"]);

    const blobUrl = await serveConnect(BlobService, {
      async uploadBlob(reqs: AsyncIterable<{ part?: { kind: { case: string; value?: unknown } } }>) {
        let n = 0;
        for await (const r of reqs) n += r.part?.kind.case === "chunk" ? (r.part.kind.value as Uint8Array).length : 0;
        return { blobId: `bytes-${n}` };
      },
    });
    const parts = (async function* () {
      for (let i = 0; i < 20; i++) yield { part: { kind: { case: "chunk", value: new Uint8Array(100_000) } } };
    })();
    expect((await createClient(BlobService, transport(blobUrl)).uploadBlob(parts as never)).blobId).toBe("bytes-2000000");
  });

  it("gives up at the deadline and cancels the server's work", async () => {
    let serverSignal: AbortSignal | undefined;
    const aborted = new Promise<void>((resolve) => {
      void serveConnect(ShellService, {
        async *openShell(_reqs: unknown, ctx: HandlerContext) {
          serverSignal = ctx.signal;
          ctx.signal.addEventListener("abort", () => resolve());
          yield create(OpenShellResponseSchema, { kind: { case: "actionId", value: "A" } });
          await new Promise(() => {});
        },
      }).then((url) => (urlOf = url));
    });
    let urlOf = "";
    while (!urlOf) await new Promise((r) => setImmediate(r));
    const err = await failure(collect(shell(urlOf).openShell(lines("x"), { timeoutMs: 200 })));
    expect(err?.code).toBe(Code.DeadlineExceeded);
    await aborted;
    expect(serverSignal?.aborted).toBe(true);
  });

  it("ends the call when the caller aborts, and the server sees it", async () => {
    const serverAborted = resolvers();
    const first = resolvers();
    const url = await serveConnect(ShellService, {
      async *openShell(_reqs: unknown, ctx: HandlerContext) {
        ctx.signal.addEventListener("abort", () => serverAborted.resolve());
        yield create(OpenShellResponseSchema, { kind: { case: "actionId", value: "A" } });
        await new Promise(() => {});
      },
    });
    const ac = new AbortController();
    const done = failure((async () => {
      for await (const _ of shell(url).openShell(lines("x"), { signal: ac.signal })) first.resolve();
    })());
    await first.promise;
    ac.abort();
    expect((await done)?.code).toBe(Code.Canceled);
    await serverAborted.promise;
  });

  it("cancels the call when the request iterable fails", async () => {
    const serverAborted = resolvers();
    const url = await serveConnect(ShellService, {
      async *openShell(reqs: AsyncIterable<OpenShellRequest>, ctx: HandlerContext) {
        ctx.signal.addEventListener("abort", () => serverAborted.resolve());
        for await (const _ of reqs) yield create(OpenShellResponseSchema, { kind: { case: "actionId", value: "A" } });
      },
    });
    const requests = (async function* () {
      yield stdin("x");
      throw new Error("the producer broke");
    })();
    const err = await failure(collect(shell(url).openShell(requests)));
    expect(err).toBeDefined();
    await serverAborted.promise;
  });
});

describe("the hand-framed streaming client against @grpc/grpc-js", () => {
  it("runs a bidi call and reads its error status and metadata", async () => {
    grpcServer = new grpc.Server();
    const method = ShellService.method.openShell;
    grpcServer.addService(
      {
        OpenShell: {
          path: "/farm.v1.ShellService/OpenShell",
          requestStream: true,
          responseStream: true,
          requestSerialize: (m: OpenShellRequest) => Buffer.from(toBinary(method.input, m)),
          requestDeserialize: (b: Buffer) => fromBinary(method.input, b),
          responseSerialize: (m: OpenShellResponse) => Buffer.from(toBinary(method.output, m)),
          responseDeserialize: (b: Buffer) => fromBinary(method.output, b),
        },
      } as grpc.ServiceDefinition,
      {
        OpenShell: (call: grpc.ServerDuplexStream<OpenShellRequest, OpenShellResponse>) => {
          call.on("data", (r: OpenShellRequest) => {
            if (r.kind.case === "stdin") call.write(create(OpenShellResponseSchema, { kind: { case: "output", value: r.kind.value } }));
          });
          call.on("end", () => {
            const md = new grpc.Metadata();
            md.set("x-after", "t");
            call.emit("error", { code: grpc.status.RESOURCE_EXHAUSTED, details: "too much", metadata: md });
          });
        },
      },
    );
    const port = await new Promise<number>((resolve, reject) => grpcServer?.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    const seen: string[] = [];
    const err = await failure((async () => {
      for await (const m of shell(`http://127.0.0.1:${port}`).openShell(lines("p", "q"))) seen.push(text(m));
    })());
    expect(seen).toEqual(["p", "q"]);
    expect(err?.code).toBe(Code.ResourceExhausted);
    expect(err?.rawMessage).toBe("too much");
    expect(err?.metadata.get("x-after")).toBe("t");
  });
});

describe("the hand-framed streaming client against a bare HTTP/2 server", () => {
  const ok = { ":status": 200, "content-type": "application/grpc" };

  it("reads messages split across DATA frames byte by byte, and several in one frame", async () => {
    const url = await serveBare((stream) => {
      stream.respond(ok, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      const all = Buffer.concat([output("first"), output("second")]);
      let i = 0;
      const step = () => {
        if (i < all.length) {
          stream.write(all.subarray(i, i + 1), () => setImmediate(step));
          i++;
        } else stream.end(Buffer.concat([output("x"), output("y"), output("")]));
      };
      step();
    });
    expect(await collect(shell(url).openShell(lines()))).toEqual(["first", "second", "x", "y", ""]);
  });

  it("refuses an oversized message from its length prefix, without waiting for its bytes", async () => {
    const url = await serveBare((stream) => {
      stream.respond(ok);
      // 4 GiB announced; nothing follows, and the stream stays open.
      stream.write(Buffer.from([0, 0xff, 0xff, 0xff, 0xff]));
    });
    const err = await failure(collect(shell(url).openShell(lines())));
    expect(err?.code).toBe(Code.ResourceExhausted);
    expect(err?.rawMessage).toMatch(/message size 4294967295 is larger than configured readMaxBytes/);
  });

  it("ends a call aborted while its stream is still being opened, though no answer ever comes", async () => {
    // The client library's logcat aborted while waiting for the first line hung here: the abort came
    // before the listener was added (during the session's request), and the server sends nothing.
    const url = await serveBare(() => {});
    const abort = new AbortController();
    const first = shell(url).openShell(lines(), { signal: abort.signal })[Symbol.asyncIterator]().next();
    abort.abort();
    const err = await failure(first);
    expect(err?.code).toBe(Code.Canceled);
  });

  it("reads a trailers-only error with its status", async () => {
    const url = await serveBare((stream) => stream.respond({ ...ok, "grpc-status": String(Code.PermissionDenied), "grpc-message": "no%20way" }, { endStream: true }));
    const err = await failure(collect(shell(url).openShell(lines("x"))));
    expect(err?.code).toBe(Code.PermissionDenied);
    expect(err?.rawMessage).toBe("no way");
  });

  it("fails a stream that ends inside a message, or without a status", async () => {
    const cut = await serveBare((stream) => {
      stream.respond(ok, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(output("whole-message").subarray(0, 8));
    });
    expect((await failure(collect(shell(cut).openShell(lines()))))?.rawMessage).toMatch(/incomplete envelope/);
    const noStatus = await serveBare((stream) => {
      stream.respond(ok);
      stream.end(output("a"));
    });
    expect((await failure(collect(shell(noStatus).openShell(lines()))))?.rawMessage).toMatch(/missing status/);
  });

  it("reports a reset mid-stream with gRPC's code for it, after the messages before it", async () => {
    const url = await serveBare((stream) => {
      stream.respond(ok);
      stream.write(output("before"), () => stream.close(constants.NGHTTP2_REFUSED_STREAM));
    });
    const seen: string[] = [];
    // The request side stays open, so the reset ends a stream still open both ways.
    const { requests, end } = openRequests();
    const err = await failure((async () => {
      for await (const m of shell(url).openShell(requests)) seen.push(text(m));
    })());
    end();
    expect(seen).toEqual(["before"]);
    expect(err?.code).toBe(Code.Unavailable);
    expect(err?.rawMessage).toMatch(/REFUSED_STREAM/);
  });

  it("holds a fast sender when the caller stops reading: flow control, not memory", async () => {
    // The server writes 1 KiB messages as fast as the client's window lets it, respecting its own backpressure.
    const TOTAL = 256 * 1024 * 1024;
    let written = 0;
    let blocked = false;
    const url = await serveBare((stream, headers) => {
      if (headers[":path"] === "/farm.v1.ShellService/WatchShell") {
        // A second stream on the same connection: its answer comes after every frame sent before it.
        stream.respond({ ...ok, "grpc-status": "0" }, { endStream: true });
        return;
      }
      stream.respond(ok);
      const chunk = output("z".repeat(1024));
      const pump = () => {
        while (written < TOTAL) {
          written += chunk.length;
          if (!stream.write(chunk)) {
            blocked = true;
            stream.once("drain", () => {
              blocked = false;
              pump();
            });
            return;
          }
        }
        stream.end();
      };
      pump();
    });
    const client = shell(url, 256 * 1024);
    const it = client.openShell(lines())[Symbol.asyncIterator]();
    await it.next();
    // Wait until the server is held, then let every frame in flight arrive (a round trip on the same connection).
    while (!blocked) await new Promise((r) => setImmediate(r));
    const roundTrips = async () => {
      for (let i = 0; i < 3; i++) {
        await failure((async () => {
          for await (const _ of client.watchShell({})) void _;
        })());
      }
    };
    // Until the sender is held for good: round trips (each a chance for window updates to arrive) that move nothing, or it sent everything.
    for (let before = -1; written !== before && written < TOTAL;) {
      before = written;
      await roundTrips();
    }
    expect(blocked).toBe(true);
    // Client window (64 KiB default) + the inbox's high water (256 KiB) + socket and server buffers: far below 64 MiB.
    expect(written).toBeLessThan(4 * 1024 * 1024);
    await it.return?.();
  });
});
