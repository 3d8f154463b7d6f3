/**
 * The client's side of one unary hop, counted in instructions: valgrind's
 * callgrind counts what a process executes, which the machine's load does
 * not change (wall time and CPU per call at load 15 move by more than the
 * client cuts this measures). Each client makes a small gRPC call (a
 * health check) against rpc-floor's bare node:http2 server in a process
 * of its own; it runs twice under callgrind, with few calls and with many,
 * and the difference over the extra calls is its instructions per call
 * (start-up, warm-up and connection cancel out). Node runs with V8's
 * --single-threaded: the compiler's and the GC's work is done on the main
 * thread when the code needs it, not on background threads that do more
 * or less of it as the machine schedules them. The bare node:http2
 * client is the floor (x1); then farm's client as the routing benchmark
 * uses it (farmTransport, no deadline) and as @farm/client calls (its
 * interceptors, a deadline, a lease header).
 *
 *   node test/dist/bench/client-instructions.js [--few 100] [--many 500]
 *
 * Needs valgrind; not in run-all (six runs under callgrind take minutes).
 */
import { fork, spawn } from "node:child_process";
import { connect as h2connect } from "node:http2";
import { connect as netConnect } from "node:net";
import { parseArgs } from "node:util";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { Wire } from "@farm/client/wire";
import { farmTransport } from "@farm/shared/farm-transport";
import { Health, HealthCheckRequestSchema, HealthCheckResponseSchema } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { emitReport, round } from "./bench-report.js";

const KINDS = ["bare", "farm", "library"] as const;
type Kind = (typeof KINDS)[number];
const NAMES: Record<Kind, string> = {
  bare: "bare node:http2 client (floor)",
  farm: "farm's client (farmTransport, no deadline)",
  library: "farm's client as @farm/client calls (interceptors, deadline, lease header)",
};

const { values } = parseArgs({ options: { few: { type: "string", default: "100" }, many: { type: "string", default: "500" }, client: { type: "string" }, port: { type: "string" }, calls: { type: "string" } } });
const REQUEST = create(HealthCheckRequestSchema, { service: "farm.v1.DeviceService" });

/** One client making `calls` calls one after another, then exiting: what runs under callgrind. */
async function runClient(kind: Kind, port: number, calls: number): Promise<void> {
  const url = `http://127.0.0.1:${port}`;
  let call: () => Promise<unknown>;
  if (kind === "bare") {
    const session = h2connect(url, { createConnection: () => netConnect({ host: "127.0.0.1", port, noDelay: true }) });
    call = () =>
      new Promise((resolve, reject) => {
        const r = session.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Check", "content-type": "application/grpc", te: "trailers" });
        const chunks: Buffer[] = [];
        r.on("data", (c: Buffer) => chunks.push(c));
        r.on("trailers", (t) => {
          if (t["grpc-status"] !== "0") reject(new Error(`grpc-status ${String(t["grpc-status"])}`));
        });
        r.on("end", () => resolve(fromBinary(HealthCheckResponseSchema, Buffer.concat(chunks).subarray(5))));
        r.on("error", reject);
        const msg = toBinary(HealthCheckRequestSchema, REQUEST);
        const out = Buffer.allocUnsafe(msg.length + 5);
        out[0] = 0;
        out.writeUInt32BE(msg.length, 1);
        out.set(msg, 5);
        r.end(out);
      });
  } else if (kind === "farm") {
    const client = createClient(Health, farmTransport({ url, token: "t" }));
    call = () => client.check(REQUEST);
  } else {
    const wire = new Wire({ coordinator: url, coordinatorSource: "bench", token: "t", caFile: undefined, insecure: false }, 30_000);
    const opts = wire.options({ lease: "farml_bench" });
    const client = wire.client(Health);
    call = () => client.check(REQUEST, opts);
  }
  for (let i = 0; i < calls; i++) await call();
}

/** Instructions a client process executes making `calls` calls (callgrind, all its threads). */
function instructions(kind: Kind, port: number, calls: number): Promise<number> {
  return new Promise((resolve, reject) => {
    // V8 single-threaded: its compiler and GC threads otherwise do more or less work by how the machine schedules them (the counts of
    // one build moved by 14 % between runs); on the main thread the count follows the code.
    const args = ["--tool=callgrind", "--callgrind-out-file=/dev/null", process.execPath, "--single-threaded", new URL(import.meta.url).pathname, "--client", kind, "--port", String(port), "--calls", String(calls)];
    const proc = spawn("valgrind", args, { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    proc.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    proc.once("error", reject);
    proc.once("exit", (code) => {
      const n = /Collected : (\d+)/.exec(err);
      if (code === 0 && n) resolve(Number(n[1]));
      else reject(new Error(`${kind} under callgrind exited ${code}: ${err.slice(-2000)}`));
    });
  });
}

async function main(): Promise<void> {
  const few = Number(values.few);
  const many = Number(values.many);
  if (!(many > few && few > 0)) throw new Error("--many must be larger than --few, both positive");
  const server = fork(new URL("./rpc-floor.js", import.meta.url).pathname, ["--server"]);
  try {
    const port = (await new Promise<{ h2: number }>((r) => server.once("message", (m) => r(m as { h2: number })))).h2;
    const perCall = new Map<Kind, number>();
    for (const kind of KINDS) {
      const a = await instructions(kind, port, few);
      const b = await instructions(kind, port, many);
      perCall.set(kind, (b - a) / (many - few));
    }
    const floor = perCall.get("bare") as number;
    console.log(`instructions per unary call, client side (callgrind: ${many} calls minus ${few}), against a bare node:http2 server in another process`);
    for (const kind of KINDS) {
      const n = perCall.get(kind) as number;
      console.log(`  ${NAMES[kind].padEnd(80)} ${(n / 1e3).toFixed(0).padStart(6)} k  ${(n / floor).toFixed(2)}x`);
    }
    emitReport(
      "client-instructions",
      KINDS.map((kind) => ({
        measure: `client instructions per unary call: ${NAMES[kind]}`,
        instant: `${((perCall.get(kind) as number) / 1e3).toFixed(0)} k, ${((perCall.get(kind) as number) / floor).toFixed(2)}x bare`,
        realistic: null,
        target: "",
        pass: null,
      })),
      { few, many, perCall: Object.fromEntries([...perCall].map(([k, v]) => [k, round(v, 0)])) },
    );
  } finally {
    server.kill();
  }
}

if (values.client) {
  await runClient(values.client as Kind, Number(values.port), Number(values.calls));
  process.exit(0);
} else {
  await main();
  process.exit(0);
}
