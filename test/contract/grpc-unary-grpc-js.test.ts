/**
 * farm's client (farmTransport, with its hand-framed unary calls) against
 * a stock @grpc/grpc-js server: the other gRPC implementation, which
 * answers errors trailers-only and writes its own status details. Success
 * with metadata, a farm error with its detail, every status, deadline,
 * cancel, a large message, and the server going away mid-call.
 */
import { afterEach, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { DeviceService, RunShellRequestSchema, RunShellResponseSchema, type RunShellRequest, type RunShellResponse } from "@farm/shared/gen/farm/v1/device_service_pb";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { Errors, farmError, toErrorReport } from "@farm/shared/errors";
import { farmTransport } from "@farm/shared/farm-transport";

type Handler = (call: grpc.ServerUnaryCall<RunShellRequest, RunShellResponse>, done: grpc.sendUnaryData<RunShellResponse>) => void;

let server: grpc.Server | undefined;
afterEach(() => {
  server?.forceShutdown();
  server = undefined;
});

async function serve(handler: Handler): Promise<string> {
  server = new grpc.Server();
  server.addService(
    {
      runShell: {
        path: "/farm.v1.DeviceService/RunShell",
        requestStream: false,
        responseStream: false,
        requestSerialize: (m: RunShellRequest) => Buffer.from(toBinary(RunShellRequestSchema, m)),
        requestDeserialize: (b: Buffer) => fromBinary(RunShellRequestSchema, b),
        responseSerialize: (m: RunShellResponse) => Buffer.from(toBinary(RunShellResponseSchema, m)),
        responseDeserialize: (b: Buffer) => fromBinary(RunShellResponseSchema, b),
      },
    },
    { runShell: handler as grpc.UntypedHandleCall },
  );
  const port = await new Promise<number>((resolve, reject) => server?.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  return `http://127.0.0.1:${port}`;
}

/** A ConnectError as grpc-js metadata: grpc-status-details-bin as any gRPC server writes it. */
function errorMetadata(err: ConnectError): grpc.Metadata {
  const h = new Headers();
  setTrailerStatus(h, err);
  const md = new grpc.Metadata();
  md.set("grpc-status-details-bin", Buffer.from(h.get("grpc-status-details-bin") as string, "base64"));
  return md;
}

const failure = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => ConnectError.from(e));
const target = { serial: "S1" };
const client = (url: string, interceptors: Interceptor[] = []) => createClient(DeviceService, farmTransport({ url, token: "tok", interceptors }));

describe("farm's unary client against a @grpc/grpc-js server", () => {
  it("calls with its token and timeout and reads the answer, its headers and trailers", async () => {
    let seen: Record<string, unknown> = {};
    const url = await serve((call, done) => {
      seen = { command: call.request.command, auth: call.metadata.get("authorization")[0], deadline: Number.isFinite(call.getDeadline() as number) };
      const h = new grpc.Metadata();
      h.set("x-answer", "h");
      call.sendMetadata(h);
      const t = new grpc.Metadata();
      t.set("x-after", "t");
      done(null, create(RunShellResponseSchema, { exitCode: 4, stdout: Buffer.from("out") }), t);
    });
    let observed: unknown;
    const watch: Interceptor = (next) => async (req) => {
      const res = await next(req);
      observed = [res.header.get("x-answer"), res.trailer.get("x-after")];
      return res;
    };
    const res = await client(url, [watch]).runShell({ target, command: "echo out" }, { timeoutMs: 5_000 });
    expect([res.exitCode, Buffer.from(res.stdout).toString()]).toEqual([4, "out"]);
    expect(seen).toEqual({ command: "echo out", auth: "Bearer tok", deadline: true });
    expect(observed).toEqual(["h", "t"]);
  });

  it("reads a farm error with its detail from a trailers-only answer", async () => {
    const err = farmError(Errors.DEVICE_BUSY, "busy: 100% ünïcode", "device", { dispatched: false, ambiguous: false });
    const url = await serve((_call, done) => done({ code: grpc.status.UNAVAILABLE, details: err.rawMessage, metadata: errorMetadata(err) }));
    const got = await failure(client(url).runShell({ target, command: "true" }));
    expect(got?.code).toBe(Code.Unavailable);
    expect(got?.findDetails(ErrorDetailSchema)[0]).toMatchObject({ code: "DEVICE_BUSY", field: "device" });
    expect(toErrorReport(got)).toMatchObject({ code: "DEVICE_BUSY", field: "device", message: "busy: 100% ünïcode", dispatched: false });
  });

  it("reads every status grpc-js sends, with its message", async () => {
    let code = grpc.status.CANCELLED as number;
    const url = await serve((_call, done) => done({ code, details: `status ${code} ✓` }));
    const c = client(url);
    for (; code <= grpc.status.UNAUTHENTICATED; code++) {
      const got = await failure(c.runShell({ target, command: "true" }));
      expect([got?.code, got?.rawMessage]).toEqual([code, `status ${code} ✓`]);
    }
  });

  it("cancels and gives up at its deadline; the server hears both", async () => {
    const cancelled: (() => void)[] = [];
    let started: () => void = () => {};
    let running = new Promise<void>((r) => (started = r));
    const url = await serve((call) => {
      call.on("cancelled", () => cancelled.shift()?.());
      started();
    });
    const c = client(url);
    const heard = (n: number) => Array.from({ length: n }, () => new Promise<void>((r) => cancelled.push(r)));
    const [first, second] = heard(2);
    const abort = new AbortController();
    const call = failure(c.runShell({ target, command: "hang" }, { signal: abort.signal }));
    await running;
    abort.abort();
    expect((await call)?.code).toBe(Code.Canceled);
    await first;
    running = new Promise<void>((r) => (started = r));
    // The farm client gives up DEADLINE_GRACE_MS after the 100 ms it sent: a farm DEADLINE_EXCEEDED.
    const late = await failure(c.runShell({ target, command: "hang" }, { timeoutMs: 100 }));
    expect(late?.code).toBe(Code.DeadlineExceeded);
    await running;
    await second;
  });

  it("carries a large message each way", async () => {
    const url = await serve((call, done) => done(null, create(RunShellResponseSchema, { stdout: Buffer.alloc(12 * 1024 * 1024, call.request.command.length % 251) })));
    const res = await client(url).runShell({ target, command: "y".repeat(3 * 1024 * 1024) });
    expect(res.stdout.length).toBe(12 * 1024 * 1024);
    expect(res.stdout[0]).toBe((3 * 1024 * 1024) % 251);
  });

  it("fails a call whose server goes away mid-call as a lost connection, with no farm detail", async () => {
    let started: () => void = () => {};
    const running = new Promise<void>((r) => (started = r));
    const url = await serve(() => started());
    const call = failure(client(url).runShell({ target, command: "hang" }));
    await running;
    server?.forceShutdown();
    const got = await call;
    expect(got?.findDetails(ErrorDetailSchema)).toEqual([]);
    expect(got?.rawMessage).toMatch(/ECONNRESET|socket hang up|stream closed|GOAWAY|session closed/i);
  });
});
