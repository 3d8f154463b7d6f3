/**
 * What one RPC hop costs on this machine, from the wire up: every client
 * against its own kind of server in another process on loopback, a small
 * protobuf each way (a health check), interleaved batch by batch in one
 * run so the machine's noise falls on all alike. Raw TCP with a length
 * prefix is the baseline (×1); bare `node:http2` on both sides is the floor
 * of an HTTP/2 hop; then @grpc/grpc-js, connect-node (gRPC over HTTP/2,
 * Connect over HTTP/1.1), farm's client (`farmTransport`) with connect's
 * unary client and with its own hand-framed one (also on a 10 KiB read,
 * which connect-node's server gzips for connect's client), and an open bidi stream's
 * round trip (bare and connect-node). Last, farm's client against a real
 * `farm coordinator` process (Health, and an authenticated ListAgents), so
 * whatever the coordinator's server side costs shows beside the floors.
 * Server CPU per call comes from /proc for the server process.
 *
 *   node test/dist/bench/rpc-floor.js [--calls 2000] [--batch 50] [--no-coordinator]
 */
import { fork, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { connect as h2connect, constants, createServer as createH2Server, type ClientHttp2Session, type ServerHttp2Stream } from "node:http2";
import { createServer as createH1Server } from "node:http";
import { connect as netConnect, createServer as createTcpServer, type Socket } from "node:net";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createClient, type ConnectRouter, type Transport } from "@connectrpc/connect";
import { connectNodeAdapter, createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { farmTransport } from "@farm/shared/farm-transport";
import { Wire } from "@farm/client/wire";
import { noDelaySessionOptions } from "@farm/shared/no-delay";
import { AgentService, AttachRequestSchema, AttachResponseSchema, type AttachRequest, type AttachResponse } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { DeviceService, OwnershipSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { Health, HealthCheckRequestSchema, HealthCheckResponseSchema, HealthCheckResponse_ServingStatus } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { startFarm, type FarmProcess } from "../support/farm-process.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";
import { emitReport, round } from "./bench-report.js";
import { cpuSeconds, median, percentile } from "./proc-stats.js";

const { values } = parseArgs({
  options: { calls: { type: "string", default: "2000" }, batch: { type: "string", default: "50" }, server: { type: "boolean", default: false }, "no-coordinator": { type: "boolean", default: false } },
});
const N = Number(values.calls);
const BATCH = Number(values.batch);

const REQUEST = create(HealthCheckRequestSchema, { service: "farm.v1.DeviceService" });
const RESPONSE = toBinary(HealthCheckResponseSchema, create(HealthCheckResponseSchema, { status: HealthCheckResponse_ServingStatus.SERVING }));
const CHECK_PATH = "/grpc.health.v1.Health/Check";
const ATTACH_PATH = "/farm.v1.AgentService/Attach";

/**
 * A read with a larger answer: an ownership status with a phone's recent
 * actions, about the 10 KB GetOwnership answered in routing-overhead's lab.
 * Over 1 KiB, so connect-node's server gzips it for a client that offers
 * gzip (connect-node's clients do; farm's hand-framed one does not).
 */
const OWNERSHIP = create(OwnershipSchema, {
  physicalId: "a".repeat(64),
  serial: "ROUTE0001",
  agentId: "agent-1",
  identityStatus: "resolved",
  recent: Array.from({ length: 40 }, (_, i) => ({
    actionId: `0e6f${String(i).padStart(4, "0")}-8c1b-4b7e-9d35-2f4a6c8e0b1d`,
    physicalId: "a".repeat(64),
    serial: "ROUTE0001",
    kind: "shell",
    requestSha256: "f".repeat(64),
    requestJson: "{\"command\":\"echo hi\"}",
    state: "settled",
    dispatched: true,
    bootId: "5b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",
  })),
});
const OWNERSHIP_BYTES = toBinary(OwnershipSchema, OWNERSHIP).length;

/** A routed call's shape on the uplink: a small request out, a small result back. */
const call = (i: number): AttachResponse => create(AttachResponseSchema, { kind: { case: "call", value: { commandId: String(i), method: "farm.v1.DeviceService/RunShell", request: new Uint8Array(40) } } });
const result = (id: string): AttachRequest => create(AttachRequestSchema, { kind: { case: "callResult", value: { commandId: id, response: new Uint8Array(60) } } });

function envelope(data: Uint8Array): Buffer {
  const b = Buffer.allocUnsafe(data.length + 5);
  b[0] = 0;
  b.writeUInt32BE(data.length, 1);
  b.set(data, 5);
  return b;
}

/** Splits length-prefixed frames (`prefix` bytes of header, the length in the last 4) out of a byte stream. */
function frames(prefix: number, onFrame: (body: Buffer) => void): (chunk: Buffer) => void {
  let buf: Buffer = Buffer.alloc(0);
  return (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    while (buf.length >= prefix) {
      const len = buf.readUInt32BE(prefix - 4);
      if (buf.length < prefix + len) break;
      onFrame(buf.subarray(prefix, prefix + len));
      buf = buf.subarray(prefix + len);
    }
  };
}

interface Ports {
  tcp: number;
  h2: number;
  grpcJs: number;
  connectH2: number;
  connectH1: number;
}

/** The server process: one server of each kind, each decoding the request and encoding the answer. */
async function serve(): Promise<void> {
  const listen = (srv: { listen: (port: number, host: string, cb: () => void) => unknown; address: () => unknown }) => new Promise<number>((resolve) => srv.listen(0, "127.0.0.1", () => resolve((srv.address() as { port: number }).port)));
  // Raw TCP: a 4-byte length and the message, each way.
  const tcp = createTcpServer({ noDelay: true }, (sock) => {
    sock.on(
      "data",
      frames(4, (body) => {
        fromBinary(HealthCheckRequestSchema, body);
        const out = Buffer.allocUnsafe(4 + RESPONSE.length);
        out.writeUInt32BE(RESPONSE.length, 0);
        out.set(RESPONSE, 4);
        sock.write(out);
      }),
    );
  });
  // Bare node:http2, gRPC-framed: unary Check, and Attach echoing one call per result.
  const h2 = createH2Server();
  h2.on("connection", (s: Socket) => s.setNoDelay(true));
  h2.on("stream", (stream: ServerHttp2Stream, headers) => {
    if (headers[":path"] === ATTACH_PATH) {
      stream.respond({ ":status": 200, "content-type": "application/grpc" });
      let i = 0;
      stream.write(envelope(toBinary(AttachResponseSchema, call(i++))));
      stream.on(
        "data",
        frames(5, (body) => {
          fromBinary(AttachRequestSchema, body);
          stream.write(envelope(toBinary(AttachResponseSchema, call(i++))));
        }),
      );
      return;
    }
    stream.on(
      "data",
      frames(5, (body) => {
        fromBinary(HealthCheckRequestSchema, body);
        stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(envelope(toBinary(HealthCheckResponseSchema, create(HealthCheckResponseSchema, { status: HealthCheckResponse_ServingStatus.SERVING }))));
      }),
    );
  });
  // @grpc/grpc-js.
  const g = new grpc.Server();
  g.addService({
    check: {
      path: CHECK_PATH,
      requestStream: false,
      responseStream: false,
      requestSerialize: (m: unknown) => Buffer.from(m as Uint8Array),
      requestDeserialize: (b: Buffer) => fromBinary(HealthCheckRequestSchema, b),
      responseSerialize: (m: unknown) => Buffer.from(toBinary(HealthCheckResponseSchema, m as never)),
      responseDeserialize: (b: Buffer) => b,
    },
    attach: {
      path: ATTACH_PATH,
      requestStream: true,
      responseStream: true,
      requestSerialize: (m: unknown) => Buffer.from(m as Uint8Array),
      requestDeserialize: (b: Buffer) => fromBinary(AttachRequestSchema, b),
      responseSerialize: (m: unknown) => Buffer.from(toBinary(AttachResponseSchema, m as never)),
      responseDeserialize: (b: Buffer) => b,
    },
  }, {
    check: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, create(HealthCheckResponseSchema, { status: HealthCheckResponse_ServingStatus.SERVING })),
    attach: (s: grpc.ServerDuplexStream<unknown, unknown>) => {
      let i = 0;
      s.write(call(i++));
      s.on("data", () => s.write(call(i++)));
    },
  });
  const grpcJs = await new Promise<number>((resolve, reject) => g.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  // connect-node, over HTTP/2 (gRPC, Connect) and HTTP/1.1 (Connect).
  const routes = (r: ConnectRouter) => {
    r.service(Health, { check: () => ({ status: HealthCheckResponse_ServingStatus.SERVING }), watch: async function* () {} });
    r.service(DeviceService, { getOwnership: () => ({ ownership: OWNERSHIP }) });
    r.service(AgentService, {
      attach: async function* (requests) {
        let i = 0;
        yield call(i++);
        for await (const _ of requests) yield call(i++);
      },
    });
  };
  const c2 = createH2Server(connectNodeAdapter({ routes }));
  c2.on("connection", (s: Socket) => s.setNoDelay(true));
  const c1 = createH1Server(connectNodeAdapter({ routes }));
  c1.on("connection", (s: Socket) => s.setNoDelay(true));
  const ports: Ports = { tcp: await listen(tcp), h2: await listen(h2), grpcJs, connectH2: await listen(c2), connectH1: await listen(c1) };
  process.send?.(ports);
}

/** One client: a call to time, and whose CPU serves it. */
interface Case {
  name: string;
  kind: "unary" | "stream";
  run: () => Promise<unknown>;
  server: () => number;
  times: number[];
  cpuMs: number;
  /** This process's main-thread CPU over the case's calls (the client's work; the server is in another process). */
  clientCpuMs: number;
  close?: () => void;
}

/** This process's main-thread CPU so far, in ms (schedstat is in ns; stat's 10 ms ticks are too coarse per batch). */
function ownMainThreadCpuMs(): number {
  return Number(readFileSync(`/proc/${process.pid}/task/${process.pid}/schedstat`, "utf8").split(" ")[0]) / 1e6;
}

function rawTcp(port: number): Promise<{ run: () => Promise<unknown>; close: () => void }> {
  return new Promise((resolve) => {
    const sock = netConnect({ host: "127.0.0.1", port, noDelay: true }, () => {
      let waiting: (() => void) | undefined;
      sock.on(
        "data",
        frames(4, (body) => {
          fromBinary(HealthCheckResponseSchema, body);
          waiting?.();
        }),
      );
      resolve({
        run: () =>
          new Promise<void>((r) => {
            waiting = r;
            const msg = toBinary(HealthCheckRequestSchema, REQUEST);
            const out = Buffer.allocUnsafe(4 + msg.length);
            out.writeUInt32BE(msg.length, 0);
            out.set(msg, 4);
            sock.write(out);
          }),
        close: () => sock.destroy(),
      });
    });
  });
}

/** A bare node:http2 gRPC unary call on a kept session: what any HTTP/2 client must do at least. */
function bareUnary(session: ClientHttp2Session): () => Promise<unknown> {
  return () =>
    new Promise((resolve, reject) => {
      const r = session.request({ ":method": "POST", ":path": CHECK_PATH, "content-type": "application/grpc", te: "trailers" });
      const chunks: Buffer[] = [];
      r.on("data", (c: Buffer) => chunks.push(c));
      r.on("trailers", (t) => {
        if (t["grpc-status"] !== "0") reject(new Error(`grpc-status ${String(t["grpc-status"])}`));
      });
      r.on("end", () => resolve(fromBinary(HealthCheckResponseSchema, Buffer.concat(chunks).subarray(5))));
      r.on("error", reject);
      r.end(envelope(toBinary(HealthCheckRequestSchema, REQUEST)));
    });
}

/** Round trips on one open bare http2 stream. */
function bareStream(session: ClientHttp2Session): Promise<{ run: () => Promise<unknown>; close: () => void }> {
  const r = session.request({ ":method": "POST", ":path": ATTACH_PATH, "content-type": "application/grpc", te: "trailers" });
  let waiting: (() => void) | undefined;
  const first = new Promise<void>((res) => (waiting = res));
  r.on(
    "data",
    frames(5, (body) => {
      fromBinary(AttachResponseSchema, body);
      waiting?.();
    }),
  );
  return first.then(() => ({
    run: () =>
      new Promise<void>((res) => {
        waiting = res;
        r.write(envelope(toBinary(AttachRequestSchema, result("x"))));
      }),
    close: () => r.close(constants.NGHTTP2_CANCEL),
  }));
}

/** Round trips on one open Attach stream through a connect client. */
async function connectStream(transport: Transport): Promise<{ run: () => Promise<unknown>; close: () => void }> {
  const client = createClient(AgentService, transport);
  const stop = new AbortController();
  let answer: (r: AttachRequest) => void = () => {};
  const outgoing = (async function* () {
    for (;;) yield await new Promise<AttachRequest>((r) => (answer = r));
  })();
  const incoming = client.attach(outgoing, { signal: stop.signal })[Symbol.asyncIterator]();
  await incoming.next();
  return {
    run: async () => {
      answer(result("x"));
      await incoming.next();
    },
    close: () => stop.abort(),
  };
}

function grpcJsClient(port: number): { unary: () => Promise<unknown>; stream: () => Promise<{ run: () => Promise<unknown>; close: () => void }>; close: () => void } {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const ser = (m: unknown) => Buffer.from(toBinary(HealthCheckRequestSchema, m as never));
  return {
    unary: () => new Promise((resolve, reject) => client.makeUnaryRequest(CHECK_PATH, ser, (b: Buffer) => fromBinary(HealthCheckResponseSchema, b), REQUEST, (err, res) => (err ? reject(err) : resolve(res)))),
    stream: async () => {
      const s = client.makeBidiStreamRequest(ATTACH_PATH, (m: AttachRequest) => Buffer.from(toBinary(AttachRequestSchema, m)), (b: Buffer) => fromBinary(AttachResponseSchema, b));
      let next: () => void = () => {};
      s.on("data", () => next());
      s.on("error", () => {});
      await new Promise<void>((r) => (next = r));
      return {
        run: () =>
          new Promise<void>((r) => {
            next = r;
            s.write(result("x"));
          }),
        close: () => s.cancel(),
      };
    },
    close: () => client.close(),
  };
}

async function main(): Promise<void> {
  const child: ChildProcess = fork(new URL(import.meta.url).pathname, ["--server"]);
  let coord: FarmProcess | undefined;
  let dir: TempDir | undefined;
  const closers: (() => void)[] = [];
  try {
    const ports = await new Promise<Ports>((r) => child.once("message", (m) => r(m as Ports)));
    const serverPid = () => child.pid as number;
    const cases: Case[] = [];
    const add = (name: string, kind: Case["kind"], run: () => Promise<unknown>, server = serverPid, close?: () => void) => cases.push({ name, kind, run, server, times: [], cpuMs: 0, clientCpuMs: 0, ...(close ? { close } : {}) });

    const tcp = await rawTcp(ports.tcp);
    add("raw TCP, length-prefixed", "unary", tcp.run, serverPid, tcp.close);
    const session = h2connect(`http://127.0.0.1:${ports.h2}`, { createConnection: () => netConnect({ host: "127.0.0.1", port: ports.h2, noDelay: true }) });
    closers.push(() => session.destroy());
    add("bare node:http2 client and server", "unary", bareUnary(session));
    const gj = grpcJsClient(ports.grpcJs);
    closers.push(gj.close);
    add("@grpc/grpc-js client and server", "unary", gj.unary);
    const connectH2 = `http://127.0.0.1:${ports.connectH2}`;
    const grpcT = createGrpcTransport({ baseUrl: connectH2, nodeOptions: noDelaySessionOptions() });
    add("connect-node both sides, gRPC/HTTP2", "unary", () => createClient(Health, grpcT).check(REQUEST));
    const h1T = createConnectTransport({ httpVersion: "1.1", baseUrl: `http://127.0.0.1:${ports.connectH1}` });
    add("connect-node both sides, Connect/HTTP1.1", "unary", () => createClient(Health, h1T).check(REQUEST));
    const farmConnect = farmTransport({ url: connectH2, token: "t", unary: "connect" });
    add("farm client (connect's unary) -> connect server", "unary", () => createClient(Health, farmConnect).check(REQUEST));
    const farmOwn = farmTransport({ url: connectH2, token: "t" });
    add("farm client (hand-framed) -> connect server", "unary", () => createClient(Health, farmOwn).check(REQUEST));
    const read = { target: { serial: "ROUTE0001" } };
    const kb = (OWNERSHIP_BYTES / 1024).toFixed(1);
    add(`farm client (connect's unary) -> connect server, ${kb} KiB answer (gzipped)`, "unary", () => createClient(DeviceService, farmConnect).getOwnership(read));
    add(`farm client (hand-framed) -> connect server, ${kb} KiB answer (plain)`, "unary", () => createClient(DeviceService, farmOwn).getOwnership(read));
    // The clients alone: each against the bare server, whose own cost is the floor's.
    const bareUrl = `http://127.0.0.1:${ports.h2}`;
    const grpcToBare = createGrpcTransport({ baseUrl: bareUrl, nodeOptions: noDelaySessionOptions() });
    add("connect-node gRPC client -> bare http2 server", "unary", () => createClient(Health, grpcToBare).check(REQUEST));
    const farmToBare = farmTransport({ url: bareUrl, token: "t" });
    add("farm client (hand-framed) -> bare http2 server", "unary", () => createClient(Health, farmToBare).check(REQUEST));
    // As @farm/client makes every call: its interceptors (request id, explained errors, caller's signal), a deadline, a lease header.
    const wire = new Wire({ coordinator: bareUrl, coordinatorSource: "bench", token: "t", caFile: undefined, insecure: false }, 30_000);
    closers.push(() => wire.close());
    const wireOpts = wire.options({ lease: "farml_bench" });
    add("farm client as @farm/client calls (interceptors, deadline) -> bare http2 server", "unary", () => wire.client(Health).check(REQUEST, wireOpts));
    const farmOwnGrpcJs = farmTransport({ url: `http://127.0.0.1:${ports.grpcJs}`, token: "t" });
    add("farm client (hand-framed) -> grpc-js server", "unary", () => createClient(Health, farmOwnGrpcJs).check(REQUEST));
    const bs = await bareStream(session);
    add("open stream round trip: bare node:http2", "stream", bs.run, serverPid, bs.close);
    const gs = await gj.stream();
    add("open stream round trip: grpc-js", "stream", gs.run, serverPid, gs.close);
    const cs = await connectStream(grpcT);
    add("open stream round trip: connect-node", "stream", cs.run, serverPid, cs.close);

    if (!values["no-coordinator"]) {
      dir = await makeTempDir("bench");
      coord = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", join(dir.path, "data")], { FARM_LOG_LEVEL: "warn" });
      const url = String(coord.ready["url"]);
      const admin = (await readFile(String(coord.ready["adminTokenFile"]), "utf8")).trim();
      const coordPid = () => coord?.pid as number;
      const own = farmTransport({ url, token: admin });
      const theirs = farmTransport({ url, token: admin, unary: "connect" });
      add("farm client (hand-framed) -> farm coordinator: Health", "unary", () => createClient(Health, own).check(REQUEST), coordPid);
      add("farm client (connect's unary) -> farm coordinator: Health", "unary", () => createClient(Health, theirs).check(REQUEST), coordPid);
      add("farm client (hand-framed) -> farm coordinator: ListAgents", "unary", () => createClient(RegistryService, own).listAgents({ pageSize: 1 }), coordPid);
      add("farm client (connect's unary) -> farm coordinator: ListAgents", "unary", () => createClient(RegistryService, theirs).listAgents({ pageSize: 1 }), coordPid);
    }

    // Warm every path (JIT, sessions), then interleave batches: case A, B, C … per round.
    for (const c of cases) for (let i = 0; i < 200; i++) await c.run();
    const rounds = Math.ceil(N / BATCH);
    for (let r = 0; r < rounds; r++) {
      for (const c of cases) {
        const cpu0 = cpuSeconds(c.server());
        const own0 = ownMainThreadCpuMs();
        for (let i = 0; i < BATCH; i++) {
          const s = performance.now();
          await c.run();
          c.times.push(performance.now() - s);
        }
        c.clientCpuMs += ownMainThreadCpuMs() - own0;
        c.cpuMs += (cpuSeconds(c.server()) - cpu0) * 1000;
      }
    }

    const tcpMedian = median(cases[0]?.times ?? []);
    console.log(`one RPC hop between two processes on loopback, a small protobuf each way; ${rounds} interleaved rounds of ${BATCH} calls per client`);
    console.log(`  ${"client and server".padEnd(74)} ${"median".padStart(8)} ${"p99".padStart(8)} ${"× TCP".padStart(6)}  server CPU/call  client CPU/call`);
    const rows = cases.map((c) => {
      const med = median(c.times);
      const p99 = percentile(c.times, 99);
      const cpu = c.cpuMs / c.times.length;
      const own = c.clientCpuMs / c.times.length;
      console.log(`  ${c.name.padEnd(74)} ${med.toFixed(3).padStart(8)} ${p99.toFixed(3).padStart(8)} ${(med / tcpMedian).toFixed(1).padStart(6)}  ${cpu.toFixed(3)} ms         ${own.toFixed(3)} ms`);
      return { client: c.name, kind: c.kind, medianMs: round(med), p99Ms: round(p99), timesTcp: round(med / tcpMedian, 2), serverCpuMsPerCall: round(cpu), clientCpuMsPerCall: round(own) };
    });
    const find = (name: string) => rows.find((r) => r.client === name);
    const before = find("farm client (connect's unary) -> connect server");
    const after = find("farm client (hand-framed) -> connect server");
    if (before && after) console.log(`  farm's hand-framed unary client saves ${(before.medianMs - after.medianMs).toFixed(3)} ms median per call against connect's, same server, same run`);
    emitReport(
      "rpc-floor",
      rows.map((r) => ({
        measure: `one hop: ${r.client} (${r.kind === "stream" ? "round trip" : "unary"}; server CPU ${r.serverCpuMsPerCall.toFixed(2)} ms, client CPU ${r.clientCpuMsPerCall.toFixed(2)} ms)`,
        instant: `${r.medianMs.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)}, ${r.timesTcp.toFixed(1)}x TCP`,
        realistic: null,
        target: "",
        pass: null,
      })),
      { calls: N, batch: BATCH, rawTcpMs: round(tcpMedian), clients: rows },
    );
  } finally {
    for (const c of closers) c();
    await coord?.stop();
    await dir?.remove();
    child.kill();
  }
}

if (values.server) await serve();
else {
  await main();
  process.exit(0);
}
