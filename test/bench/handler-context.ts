/**
 * One handler context per call, made as the routed hot path makes it: the
 * coordinator's fast path (a grpc-timeout, no request signal, ended with a
 * reason) and the agent's routed call (the coordinator's cancel as request
 * signal, no deadline of its own). Connect's createHandlerContext against
 * farm's leanHandlerContext (shared/src/lean-handler-context.ts), in
 * interleaved blocks in this one process, CPU per context (user + system)
 * and the ratio. Headers are built per call on both sides, as the callers
 * do (toHeaders from the request's, callHeaders from the call's).
 *
 *   node test/dist/bench/handler-context.js [--contexts 200000] [--block 5000]
 */
import { parseArgs } from "node:util";
import { Code, ConnectError, createContextValues, createHandlerContext } from "@connectrpc/connect";
import { Health } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { leanHandlerContext } from "@farm/shared/lean-handler-context";
import { emitReport, round } from "./bench-report.js";
import { median } from "./proc-stats.js";

const { values } = parseArgs({ options: { contexts: { type: "string", default: "200000" }, block: { type: "string", default: "5000" } } });
const N = Number(values.contexts);
const BLOCK = Number(values.block);
const ENDED = new ConnectError("the call has ended", Code.Canceled);
const headers = () => new Headers({ "content-type": "application/grpc", te: "trailers", "grpc-timeout": "29999m", authorization: `Bearer farm_${"x".repeat(43)}` });

type Make = typeof createHandlerContext | typeof leanHandlerContext;
const shapes = {
  "coordinator fast path": (make: Make) => {
    const ctx = make({
      service: Health,
      method: Health.method.check,
      protocolName: "grpc",
      requestMethod: "POST",
      url: "http://127.0.0.1:1/grpc.health.v1.Health/Check",
      timeoutMs: 29_999,
      requestHeader: headers(),
      responseHeader: { "content-type": "application/grpc+proto" },
      responseTrailer: { "grpc-status": "0" },
      contextValues: createContextValues(),
    });
    ctx.abort(ENDED);
  },
  "agent routed call": (make: Make) => {
    const cancel = new AbortController();
    make({ service: Health, method: Health.method.check, protocolName: "farm-agent-call", requestMethod: "POST", url: "farm-agent:/grpc.health.v1.Health/Check", requestHeader: headers(), requestSignal: cancel.signal });
  },
} as const;

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

function block(shape: (make: Make) => void, make: Make, n: number): number {
  const t0 = cpuUs();
  for (let i = 0; i < n; i++) shape(make);
  return (cpuUs() - t0) / n;
}

const rows = [];
const details: Record<string, unknown> = { contexts: N, block: BLOCK };
console.log(`handler contexts, ${N} of each kind, interleaved blocks of ${BLOCK}: CPU per context (median of the blocks)`);
for (const [name, shape] of Object.entries(shapes)) {
  const connect: number[] = [];
  const lean: number[] = [];
  block(shape, createHandlerContext, BLOCK);
  block(shape, leanHandlerContext, BLOCK);
  for (let done = 0; done < N; done += BLOCK) {
    connect.push(block(shape, createHandlerContext, BLOCK));
    lean.push(block(shape, leanHandlerContext, BLOCK));
  }
  const [c, l] = [median(connect), median(lean)];
  console.log(`  ${name.padEnd(22)} connect ${c.toFixed(2)} us, lean ${l.toFixed(2)} us: ${(l / c).toFixed(2)}x`);
  rows.push({ measure: `handler context, ${name}: lean / connect, CPU per context`, instant: `${(l / c).toFixed(2)}x (${l.toFixed(2)} / ${c.toFixed(2)} us)`, realistic: null, target: "< 1x", pass: l < c });
  details[name] = { connectUs: round(c), leanUs: round(l) };
}
emitReport("handler-context", rows, details);
