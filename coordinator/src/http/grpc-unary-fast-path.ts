import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type Interceptor } from "@connectrpc/connect";
import { compressionNegotiate, invokeUnaryImplementation, type Compression } from "@connectrpc/connect/protocol";
import { findTrailerError, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { COMPRESS_MIN_BYTES } from "@farm/shared/compression";
import { errorFromResetCode } from "@farm/shared/grpc-unary/h2-errors";
import { toNodeHeaders } from "@farm/shared/grpc-unary/h2-headers";
import { stageTrace, TRACE_HEADER } from "@farm/shared/stage-trace";
import type { Logger } from "@farm/shared/log";
import type { RequestHandler } from "./http-server.js";
import { logMalformed, malformedRequestError } from "./malformed-request.js";
import { readUnaryMessage } from "./unary-envelope-reader.js";
import { fastPathCall, fastPathRoute } from "./fast-path-route.js";
import type { FastPathRoute, FastPathRoutes } from "./fast-path-routes.js";

export interface UnaryFastPathOptions {
  routes: FastPathRoutes<"unary">;
  /** The interceptors and context values Connect's adapter is given: the same for both paths. */
  interceptors: Interceptor[];
  contextValues(req: Http2ServerRequest): ContextValues;
  log: Logger;
  /** Counts the calls served here (the coordinator's metrics). */
  stats?: { fast: number };
}

/**
 * Serves unary gRPC calls over HTTP/2 (binary protobuf, no request
 * compression) without Connect's per-call machinery of async iterables,
 * which cost about 0.7 ms of CPU per call here: read the one envelope
 * under the method's cap, run the same interceptors and implementation
 * (invokeUnaryImplementation), and write headers, one message and the
 * trailers Connect writes for the same outcome. Everything else (streams,
 * the Connect protocol, gRPC-Web, HTTP/1.1, compressed requests, JSON)
 * goes to `next`, Connect's handler.
 */
export function grpcUnaryFastPath(next: RequestHandler, opts: UnaryFastPathOptions): RequestHandler {
  return (req, res) => {
    const route = fastPathRoute(req, opts.routes);
    if (!route) return next(req, res);
    const h2res = res as Http2ServerResponse;
    if (opts.stats) opts.stats.fast++;
    serve(req as Http2ServerRequest, h2res, route, opts).catch((err: unknown) => {
      opts.log.error("unary call failed while answering", { method: route.spec.method.name, error: err instanceof Error ? err.message : String(err) });
      if (!h2res.stream.destroyed) h2res.stream.destroy();
    });
  };
}

async function serve(req: Http2ServerRequest, res: Http2ServerResponse, route: FastPathRoute<"unary">, opts: UnaryFastPathOptions): Promise<void> {
  const { spec } = route;
  // The routing benchmark's marks (stage-trace.ts): the call's context is made, its request read, its answer written.
  const tid = stageTrace && (req.headers[TRACE_HEADER] as string | undefined);
  const { header, timeout, context } = fastPathCall(req, spec, opts.contextValues(req));
  // A caller that leaves mid-call (RST_STREAM, a dropped connection) aborts ctx.signal with Connect's code for it.
  let answered = false;
  req.stream.once("close", () => {
    if (!answered) context.abort(errorFromResetCode(req.stream.rstCode));
  });
  const compression = compressionNegotiate([...route.acceptCompression], null, header.get("grpc-accept-encoding"), "grpc-accept-encoding");
  if (compression.response) context.responseHeader.set("grpc-encoding", compression.response.name);
  let body: Buffer | undefined;
  if (tid) stageTrace?.mark(tid, "co.ctx");
  try {
    if (timeout.error) throw timeout.error;
    const input = await readUnaryMessage(req, spec.method.input, route.readMaxBytes);
    if (tid) stageTrace?.mark(tid, "co.read");
    const output = await invokeUnaryImplementation(spec, context, input, opts.interceptors);
    body = await envelope(toBinary(spec.method.output, output), compression.response);
    answered = true;
    // As Connect does, the call's signal ends with the call; with a reason made once (an AbortError is built per call, with its stack).
    context.abort(CALL_ENDED);
  } catch (e) {
    answered = true;
    context.abort(e);
    setTrailerStatus(context.responseTrailer, e instanceof ConnectError ? e : new ConnectError("internal error", Code.Internal, undefined, undefined, e));
    // A request that could not be read is the caller's INVALID_ARGUMENT, as on Connect's path (malformed-request.ts).
    const err = findTrailerError(context.responseTrailer);
    const fixed = err ? malformedRequestError(err) : undefined;
    if (fixed) {
      logMalformed(opts.log, `${spec.method.parent.typeName}/${spec.method.name}`, fixed);
      setTrailerStatus(context.responseTrailer, fixed);
    }
  }
  // The caller left (a reset, a deadline it gave up on): nothing to answer.
  if (req.stream.closed || req.stream.destroyed) return;
  res.writeHead(200, toNodeHeaders(context.responseHeader));
  res.addTrailers(toNodeHeaders(context.responseTrailer));
  if (body) res.end(body);
  else res.end();
  if (tid) stageTrace?.mark(tid, "co.end");
}

const CALL_ENDED = new ConnectError("the call has ended", Code.Canceled);

/** One gRPC envelope; compressed (flag 1) from the coordinator's threshold (the same as Connect's handler is given) when the caller accepts it. */
async function envelope(message: Uint8Array, compression: Compression | null): Promise<Buffer> {
  let flags = 0;
  let data = message;
  if (compression && data.byteLength >= COMPRESS_MIN_BYTES) {
    data = await compression.compress(data);
    flags = 1;
  }
  const out = Buffer.allocUnsafe(5 + data.byteLength);
  out[0] = flags;
  out.writeUInt32BE(data.byteLength, 1);
  out.set(data, 5);
  return out;
}
