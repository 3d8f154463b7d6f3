/**
 * What one RPC hop costs on this machine, before any farm code runs: a
 * Connect server in another process (as the coordinator is), called with
 * each client the uplink or the CLI could use. Unary: an empty health
 * check. Stream: one message each way on an open bidi stream, as the
 * coordinator's calls ride the agent's uplink (AgentService.Attach).
 *
 *   node test/dist/bench/rpc-floor.js [--calls 1000]
 */
import { fork } from "node:child_process";
import { connect as h2connect, createServer } from "node:http2";
import { connect as netConnect, type Socket } from "node:net";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { connectNodeAdapter, createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { noDelaySessionOptions } from "@farm/shared/no-delay";
import { AgentService, AttachRequestSchema, AttachResponseSchema, type AttachRequest, type AttachResponse } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { Health, HealthCheckRequestSchema, HealthCheckResponseSchema, HealthCheckResponse_ServingStatus } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { emitReport } from "./bench-report.js";
import { cpuSeconds, median, percentile } from "./proc-stats.js";

const { values } = parseArgs({ options: { calls: { type: "string", default: "1000" }, server: { type: "boolean", default: false } } });
const N = Number(values.calls);

/** A routed call's shape on the uplink: a small request out, a small result back. */
const call = (i: number): AttachResponse => create(AttachResponseSchema, { kind: { case: "call", value: { commandId: String(i), method: "farm.v1.DeviceService/RunShell", request: new Uint8Array(40) } } });
const result = (id: string): AttachRequest => create(AttachRequestSchema, { kind: { case: "callResult", value: { commandId: id, response: new Uint8Array(60) } } });

function serve(): void {
  const server = createServer(
    connectNodeAdapter({
      routes: (r) => {
        r.service(Health, { check: () => ({ status: HealthCheckResponse_ServingStatus.SERVING }), watch: async function* () {} });
        // Sends a call, waits for its result, sends the next: one round trip per result.
        r.service(AgentService, {
          attach: async function* (requests) {
            let i = 0;
            yield call(i++);
            for await (const _ of requests) yield call(i++);
          },
        });
      },
    }),
  );
  server.on("connection", (s: Socket) => s.setNoDelay(true));
  server.listen(0, "127.0.0.1", () => process.send?.((server.address() as { port: number }).port));
}

async function time(fn: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < Math.min(200, N / 5); i++) await fn();
  const t: number[] = [];
  for (let i = 0; i < N; i++) {
    const s = performance.now();
    await fn();
    t.push(performance.now() - s);
  }
  return t;
}

/** Round trips on one open Attach stream through a Connect client. */
async function connectStream(transport: Transport): Promise<number[]> {
  const client = createClient(AgentService, transport);
  let answer: (r: AttachRequest) => void = () => {};
  const outgoing = (async function* () {
    for (;;) yield await new Promise<AttachRequest>((r) => (answer = r));
  })();
  const incoming = client.attach(outgoing)[Symbol.asyncIterator]();
  await incoming.next();
  return time(async () => {
    answer(result("x"));
    await incoming.next();
  });
}

/** The same round trips through a stock @grpc/grpc-js client. */
async function grpcJsStream(port: number): Promise<{ unary: number[]; stream: number[] }> {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const ser = <D extends DescMessage>(schema: D) => (m: MessageShape<D>) => Buffer.from(toBinary(schema, m));
  const de = <D extends DescMessage>(schema: D) => (b: Buffer) => fromBinary(schema, b);
  const unary = await time(
    () =>
      new Promise((resolve, reject) =>
        client.makeUnaryRequest("/grpc.health.v1.Health/Check", ser(HealthCheckRequestSchema), de(HealthCheckResponseSchema), create(HealthCheckRequestSchema), (err, res) => (err ? reject(err) : resolve(res)))
      ),
  );
  const stream = client.makeBidiStreamRequest("/farm.v1.AgentService/Attach", ser(AttachRequestSchema), de(AttachResponseSchema));
  let next: () => void = () => {};
  stream.on("data", () => next());
  await new Promise<void>((r) => (next = r));
  const rt = await time(
    () =>
      new Promise<void>((r) => {
        next = r;
        stream.write(result("x"));
      }),
  );
  stream.cancel();
  client.close();
  return { unary, stream: rt };
}

async function main(): Promise<void> {
  const child = fork(new URL(import.meta.url).pathname, ["--server"]);
  try {
    const port = await new Promise<number>((r) => child.once("message", (m) => r(m as number)));
    const url = `http://127.0.0.1:${port}`;
    const rows: { client: string; unaryMs: number; streamRoundTripMs: number; serverCpuMsPerCall: number }[] = [];
    const measure = async (name: string, run: () => Promise<{ unary: number[]; stream: number[] }>) => {
      const c0 = cpuSeconds(child.pid as number);
      const { unary: u, stream: s } = await run();
      const cpu = ((cpuSeconds(child.pid as number) - c0) * 1000) / (2 * N);
      rows.push({ client: name, unaryMs: Number(median(u).toFixed(3)), streamRoundTripMs: Number(median(s).toFixed(3)), serverCpuMsPerCall: Number(cpu.toFixed(3)) });
      console.log(`  ${name.padEnd(34)} unary median ${median(u).toFixed(3)} ms (p99 ${percentile(u, 99).toFixed(2)}), stream round trip median ${median(s).toFixed(3)} ms; server CPU ${cpu.toFixed(3)} ms per call`);
    };
    console.log(`one RPC hop between two processes on loopback, ${N} calls each`);
    const session = h2connect(url, { createConnection: () => netConnect({ host: "127.0.0.1", port, noDelay: true }) });
    const raw = () =>
      new Promise<void>((resolve) => {
        const r = session.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Check", "content-type": "application/grpc", te: "trailers" });
        r.end(Buffer.alloc(5));
        r.resume();
        r.on("end", () => resolve());
      });
    const rawUnary = await time(raw);
    session.close();
    console.log(`  ${"node:http2, gRPC-framed by hand".padEnd(34)} unary median ${median(rawUnary).toFixed(3)} ms (the floor: no client library)`);
    const grpcT = createGrpcTransport({ baseUrl: url, nodeOptions: noDelaySessionOptions() });
    await measure("connect-node, gRPC protocol", async () => ({ unary: await time(() => createClient(Health, grpcT).check({})), stream: await connectStream(grpcT) }));
    const connectT = createConnectTransport({ httpVersion: "2", baseUrl: url, nodeOptions: noDelaySessionOptions() });
    await measure("connect-node, Connect protocol", async () => ({ unary: await time(() => createClient(Health, connectT).check({})), stream: await connectStream(connectT) }));
    await measure("@grpc/grpc-js", () => grpcJsStream(port));
    emitReport(
      "rpc-floor",
      rows.map((r) => ({ measure: `one hop: ${r.client}, unary / stream round trip`, instant: `${r.unaryMs.toFixed(2)} / ${r.streamRoundTripMs.toFixed(2)} ms`, realistic: null, target: "", pass: null })),
      { calls: N, rawHttp2UnaryMs: Number(median(rawUnary).toFixed(3)), clients: rows },
    );
  } finally {
    child.kill();
  }
}

if (values.server) serve();
else {
  await main();
  process.exit(0);
}
