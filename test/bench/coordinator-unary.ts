/**
 * The coordinator's side of one unary gRPC hop: the same coordinator
 * binary twice, one serving unary calls on its fast path
 * (grpc-unary-fast-path.ts), one with it off (FARM_UNARY_FAST_PATH=0:
 * Connect's handler), each in its own process, called in interleaved
 * blocks by the same bare node:http2 client (gRPC-framed by hand, so the
 * client's cost is the least it can be). Per call: latency, and the
 * server process's CPU. Calls: an open health check and an authenticated
 * read (RegistryService.ListDevices on an empty registry: token, access
 * rule, paging, no phone). Beside them, the floor of this stage: a bare
 * node:http2 server in its own process answering each call with canned
 * gRPC bytes (headers, one empty message, trailers), in the same blocks.
 *
 *   node test/dist/bench/coordinator-unary.js [--calls 2000] [--block 100]
 */
import { fork, type ChildProcess } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { connect as h2connect, createServer as createH2Server, type ClientHttp2Session } from "node:http2";
import { connect as netConnect, type Socket } from "node:net";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { create, toBinary } from "@bufbuild/protobuf";
import { ListDevicesRequestSchema } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { startFarm } from "../support/farm-process.js";
import { makeTempDir } from "../support/temp-dir.js";
import { addedMs, emitReport, ms, round } from "./bench-report.js";
import { cpuSeconds, median, percentile } from "./proc-stats.js";

const { values } = parseArgs({ options: { calls: { type: "string", default: "2000" }, block: { type: "string", default: "100" }, bare: { type: "boolean", default: false } } });
const N = Number(values.calls);
const BLOCK = Number(values.block);

interface Side {
  name: string;
  /** The serving process (its CPU is counted). */
  pid: number;
  stop(): Promise<unknown>;
  session: ClientHttp2Session;
  admin: string;
  latency: Record<string, number[]>;
  cpuMs: Record<string, number>;
}

const envelope = (message: Uint8Array) => {
  const b = Buffer.alloc(5 + message.length);
  b.writeUInt32BE(message.length, 1);
  b.set(message, 5);
  return b;
};

const CALLS = {
  health: { path: "/grpc.health.v1.Health/Check", body: envelope(new Uint8Array(0)), auth: false },
  listDevices: { path: "/farm.v1.RegistryService/ListDevices", body: envelope(toBinary(ListDevicesRequestSchema, create(ListDevicesRequestSchema, {}))), auth: true },
} as const;
type CallName = keyof typeof CALLS;

function call(side: Side, name: CallName): Promise<void> {
  const c = CALLS[name];
  return new Promise<void>((resolve, reject) => {
    const r = side.session.request({ ":method": "POST", ":path": c.path, "content-type": "application/grpc", te: "trailers", ...(c.auth ? { authorization: `Bearer ${side.admin}` } : {}) });
    r.on("trailers", (t) => {
      if (t["grpc-status"] !== "0") reject(new Error(`${c.path}: grpc-status ${String(t["grpc-status"])} ${decodeURIComponent(String(t["grpc-message"] ?? ""))}`));
    });
    r.on("error", reject);
    r.resume();
    r.on("end", () => resolve());
    r.end(c.body);
  });
}

async function start(name: string, env: NodeJS.ProcessEnv): Promise<Side> {
  const dir = await makeTempDir("bench-unary");
  const coord = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", join(dir.path, "data")], { FARM_LOG_LEVEL: "warn", ...env });
  const url = coord.ready["url"] as string;
  const { port } = new URL(url);
  const admin = (await readFile(coord.ready["adminTokenFile"] as string, "utf8")).trim();
  const session = h2connect(url, { createConnection: () => netConnect({ host: "127.0.0.1", port: Number(port), noDelay: true }) });
  const side = { name, pid: coord.pid, stop: () => coord.stop(), session, admin, latency: { health: [], listDevices: [] }, cpuMs: { health: 0, listDevices: 0 } };
  // A first call now: a connection that opens no stream within the coordinator's request timeout is closed.
  await call(side, "health");
  return side;
}

/** The floor: node:http2 answering any call with an empty message and grpc-status 0, nothing read or checked. */
function serveBare(): void {
  const answer = Buffer.alloc(5);
  const server = createH2Server((req, res) => {
    req.resume();
    req.once("end", () => {
      res.writeHead(200, { "content-type": "application/grpc+proto" });
      res.addTrailers({ "grpc-status": "0" });
      res.end(answer);
    });
  });
  server.on("connection", (s: Socket) => s.setNoDelay(true));
  server.listen(0, "127.0.0.1", () => process.send?.((server.address() as { port: number }).port));
}

async function startBare(): Promise<Side> {
  const child: ChildProcess = fork(new URL(import.meta.url).pathname, ["--bare"]);
  const port = await new Promise<number>((r) => child.once("message", (m) => r(m as number)));
  const session = h2connect(`http://127.0.0.1:${port}`, { createConnection: () => netConnect({ host: "127.0.0.1", port, noDelay: true }) });
  return { name: "bare node:http2", pid: child.pid as number, stop: async () => child.kill(), session, admin: "", latency: { health: [], listDevices: [] }, cpuMs: { health: 0, listDevices: 0 } };
}

async function block(side: Side, name: CallName, n: number, record: boolean): Promise<void> {
  const c0 = cpuSeconds(side.pid);
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await call(side, name);
    if (record) side.latency[name]!.push(performance.now() - t);
  }
  if (record) side.cpuMs[name]! += (cpuSeconds(side.pid) - c0) * 1000;
}

async function main(): Promise<void> {
  const sides = [await start("connect-node", { FARM_UNARY_FAST_PATH: "0" }), await start("fast path", { FARM_UNARY_FAST_PATH: "1" }), await startBare()];
  try {
    for (const s of sides) for (const name of Object.keys(CALLS) as CallName[]) await block(s, name, 300, false);
    // Interleaved blocks: A, B, A, B ... for each call, so both meet the same machine noise.
    for (let done = 0; done < N; done += BLOCK) {
      for (const name of Object.keys(CALLS) as CallName[]) for (const s of sides) await block(s, name, Math.min(BLOCK, N - done), true);
    }
    const [base, fast, bare] = sides as [Side, Side, Side];
    const rows = [];
    const details: Record<string, unknown> = { calls: N, block: BLOCK };
    console.log(`one unary gRPC call to a coordinator in another process (bare node:http2 client), ${N} calls each, interleaved blocks of ${BLOCK}`);
    for (const name of Object.keys(CALLS) as CallName[]) {
      const [b, f] = [base.latency[name]!, fast.latency[name]!];
      const [cb, cf] = [base.cpuMs[name]! / N, fast.cpuMs[name]! / N];
      for (const s of sides) {
        const l = s.latency[name]!;
        console.log(`  ${name.padEnd(12)} ${s.name.padEnd(13)} median ${ms(median(l), 3)} p99 ${ms(percentile(l, 99))}; server CPU ${ms(s.cpuMs[name]! / N, 3)} per call`);
      }
      const [l, cl] = [bare.latency[name]!, bare.cpuMs[name]! / N];
      console.log(
        `  ${name.padEnd(12)} fast path against connect-node: median ${addedMs(median(f) - median(b), 3)}, CPU ${addedMs(cf - cb, 3)} per call; against the bare floor: median ${addedMs(median(f) - median(l), 3)}, CPU ${
          addedMs(cf - cl, 3)
        }`,
      );
      rows.push({
        measure: `coordinator unary ${name}: fast path / connect-node / bare node:http2, median (CPU per call)`,
        instant: `${ms(median(f), 3)} / ${ms(median(b), 3)} / ${ms(median(l), 3)} (${ms(cf, 3)} / ${ms(cb, 3)} / ${ms(cl, 3)})`,
        realistic: null,
        target: "fast path below connect-node",
        pass: median(f) < median(b),
      });
      details[name] = {
        fastMedianMs: round(median(f)),
        connectMedianMs: round(median(b)),
        bareMedianMs: round(median(l)),
        fastP99Ms: round(percentile(f, 99)),
        connectP99Ms: round(percentile(b, 99)),
        bareP99Ms: round(percentile(l, 99)),
        fastCpuMs: round(cf),
        connectCpuMs: round(cb),
        bareCpuMs: round(cl),
      };
    }
    emitReport("coordinator-unary", rows, details);
  } finally {
    for (const s of sides) {
      s.session.close();
      await s.stop();
    }
  }
}

if (values.bare) serveBare();
else {
  await main();
  process.exit(0);
}
