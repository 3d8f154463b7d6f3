import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { compressionNegotiate, transformInvokeImplementation, type Compression } from "@connectrpc/connect/protocol";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { COMPRESS_MIN_BYTES } from "@farm/shared/compression";
import { EnvelopeInbox } from "@farm/shared/grpc-stream/envelope-inbox";
import { drained, envelopeOf, writeEnvelope } from "@farm/shared/grpc-stream/write-envelopes";
import { bytesEnvelope } from "@farm/shared/grpc-stream/bytes-envelope";
import { errorFromResetCode } from "@farm/shared/grpc-unary/h2-errors";
import { toNodeHeaders } from "@farm/shared/grpc-unary/h2-headers";
import type { RequestHandler } from "./http-server.js";
import type { UnaryFastPathOptions } from "./grpc-unary-fast-path.js";
import { fastPathCall, fastPathRoute } from "./fast-path-route.js";
import type { FastPathRoute, FastPathRoutes } from "./fast-path-routes.js";

/** Whole request messages one call holds unread before its HTTP/2 stream is paused (flow control then holds the caller). */
export const SERVE_HIGH_WATER_BYTES = 256 * 1024;

export interface StreamFastPathOptions extends Omit<UnaryFastPathOptions, "routes" | "stats"> {
  routes: FastPathRoutes<"stream">;
  /** Counts the calls served here (the coordinator's metrics). */
  stats?: { fastStreams: number };
}

/**
 * Serves streaming gRPC calls over HTTP/2 (binary protobuf, no request
 * compression) without connect-node's pipes of async iterables: request
 * messages are split from DATA chunks straight into an inbox that pauses
 * the stream when the implementation reads slowly, and each answer is
 * written as one envelope, waiting for 'drain' when the caller reads
 * slowly. The same interceptors and implementation run
 * (transformInvokeImplementation), with the same headers (sent with the
 * first message, so implementations may still set them) and trailers as
 * Connect's handler for the same outcome. Everything else goes to `next`.
 */
export function grpcStreamFastPath(next: RequestHandler, opts: StreamFastPathOptions): RequestHandler {
  return (req, res) => {
    const route = fastPathRoute(req, opts.routes);
    if (!route) return next(req, res);
    if (opts.stats) opts.stats.fastStreams++;
    const h2res = res as Http2ServerResponse;
    serve(req as Http2ServerRequest, h2res, route, opts).catch((err: unknown) => {
      opts.log.error("streaming call failed while answering", { method: route.spec.method.name, error: err instanceof Error ? err.message : String(err) });
      if (!h2res.stream.destroyed) h2res.stream.destroy();
    });
  };
}

async function serve(req: Http2ServerRequest, res: Http2ServerResponse, route: FastPathRoute<"stream">, opts: StreamFastPathOptions): Promise<void> {
  const { spec } = route;
  const { header, timeout, context } = fastPathCall(req, spec, opts.contextValues(req));
  const compression = compressionNegotiate([...route.acceptCompression], null, header.get("grpc-accept-encoding"), "grpc-accept-encoding");
  if (compression.response) context.responseHeader.set("grpc-encoding", compression.response.name);

  const inbox = new EnvelopeInbox({ maxBytes: route.readMaxBytes, highWaterBytes: SERVE_HIGH_WATER_BYTES, pause: () => req.pause(), resume: () => req.resume() });
  req.on("data", (chunk: Buffer) => {
    try {
      inbox.push(chunk);
    } catch (err) {
      inbox.fail(err);
      req.pause();
    }
  });
  req.once("end", () => inbox.end());
  const input = requestMessages(inbox, spec.method.input, timeout.error);
  const it = transformInvokeImplementation(spec, context, opts.interceptors)(input)[Symbol.asyncIterator]();

  // A caller that leaves mid-call (RST_STREAM, a dropped connection) aborts ctx.signal and the request messages with Connect's code for it.
  let answered = false;
  req.stream.once("close", () => {
    if (answered) return;
    const reason = errorFromResetCode(req.stream.rstCode) ?? new ConnectError("the caller ended the call", Code.Canceled);
    context.abort(reason);
    inbox.fail(reason);
    it.return?.().catch(() => undefined);
  });
  try {
    for (let r = await it.next(); r.done !== true; r = await it.next()) {
      // A bytes-only message (remote adb's data) goes out uncopied, unless compression applies.
      const parts = compression.response ? undefined : bytesEnvelope(spec.method.output, r.value as MessageShape<DescMessage>);
      const bytes = parts ?? (await envelope(toBinary(spec.method.output, r.value as MessageShape<DescMessage>), compression.response));
      if (req.stream.closed || req.stream.destroyed) break;
      if (!res.headersSent) res.writeHead(200, toNodeHeaders(context.responseHeader));
      if (!writeEnvelope(req.stream, bytes)) await drained(req.stream);
    }
    answered = true;
    context.abort(CALL_ENDED);
  } catch (e) {
    answered = true;
    context.abort(e);
    setTrailerStatus(context.responseTrailer, e instanceof ConnectError ? e : new ConnectError("internal error", Code.Internal, undefined, undefined, e));
  }
  if (req.stream.closed || req.stream.destroyed) return;
  if (!res.headersSent) res.writeHead(200, toNodeHeaders(context.responseHeader));
  res.addTrailers(toNodeHeaders(context.responseTrailer));
  res.end();
}

/** The request's messages, parsed as they are taken; the errors are Connect's for the same bytes. */
async function* requestMessages<I extends DescMessage>(inbox: EnvelopeInbox, input: I, timeoutError: ConnectError | undefined): AsyncGenerator<MessageShape<I>, void, undefined> {
  // As Connect's handler does: a bad grpc-timeout fails the call when its first message is asked for.
  if (timeoutError) throw timeoutError;
  for (let env = await inbox.next(); env !== undefined; env = await inbox.next()) {
    if ((env.flags & 1) === 1) throw new ConnectError("received compressed envelope, but do not know how to decompress", Code.Internal);
    let message: MessageShape<I>;
    try {
      message = fromBinary(input, env.data);
    } catch (e) {
      throw new ConnectError(`parse binary: ${e instanceof Error ? e.message : String(e)}`, Code.Internal);
    }
    yield message;
  }
}

const CALL_ENDED = new ConnectError("the call has ended", Code.Canceled);

/** One envelope, compressed (flag 1) from the coordinator's threshold when the caller accepts it. */
async function envelope(message: Uint8Array, compression: Compression | null): Promise<Buffer> {
  if (compression && message.byteLength >= COMPRESS_MIN_BYTES) return envelopeOf(await compression.compress(message), 1);
  return envelopeOf(message);
}
