import { constants, type ClientHttp2Stream, type IncomingHttpHeaders } from "node:http2";
import { toBinary, type DescMessage, type DescMethodUnary, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type ContextValues, type Interceptor, type UnaryRequest, type UnaryResponse } from "@connectrpc/connect";
import { createMethodUrl, getAbortSignalReason } from "@connectrpc/connect/protocol";
import { requestHeader, validateResponse, validateTrailer } from "@connectrpc/connect/protocol-grpc";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import { decodeAnswer } from "../answer-decode.js";
import { errorFromNode, errorFromResetCode } from "./h2-errors.js";
import { toHeaders, toNodeHeaders } from "./h2-headers.js";
import { runUnary } from "./run-unary.js";
import { encodeEnvelope, UnaryEnvelopeReader } from "./unary-envelope.js";
import { requestPaths } from "./request-paths.js";

/** What a unary answer may hold unless the caller says otherwise: far above any farm answer, far below what would hurt the client. */
export const UNARY_RESPONSE_MAX_BYTES = 64 * 1024 * 1024;

export interface GrpcUnaryOptions {
  baseUrl: string;
  /** The kept HTTP/2 session(s): shared with the transport's streams, so pings, GOAWAY and close behave as for them. */
  sessions: Http2SessionManager;
  interceptors?: Interceptor[];
  /** A response message longer than this is refused from its length prefix, before its bytes are held. */
  readMaxBytes?: number;
}

export type UnaryFn = <I extends DescMessage, O extends DescMessage>(
  method: DescMethodUnary<I, O>,
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  header: ConstructorParameters<typeof Headers>[0],
  input: MessageInitShape<I>,
  contextValues?: ContextValues,
) => Promise<UnaryResponse<I, O>>;

/**
 * A gRPC unary client framed by hand on one kept `node:http2` session:
 * the work connect-node's gRPC transport does for a unary call (async
 * iterable pipes, a universal HTTP client, stream adapters) is most of a
 * hop's cost (test/bench/rpc-floor.ts). Interceptors, the deadline signal
 * and cancellation behave as with createGrpcTransport (run-unary.ts); the
 * answer and its errors (HTTP status, grpc-status, grpc-message,
 * grpc-status-details-bin) are judged by connect's own gRPC rules.
 */
export function grpcUnary(opts: GrpcUnaryOptions): UnaryFn {
  const maxBytes = opts.readMaxBytes ?? UNARY_RESPONSE_MAX_BYTES;
  const interceptors = opts.interceptors ?? [];
  const pathOf = requestPaths(opts.baseUrl);

  return async function unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: ConstructorParameters<typeof Headers>[0],
    input: MessageInitShape<I>,
    contextValues?: ContextValues,
  ): Promise<UnaryResponse<I, O>> {
    const timeout = timeoutMs === undefined || timeoutMs <= 0 ? undefined : timeoutMs;
    const req = {
      stream: false as const,
      service: method.parent,
      method,
      requestMethod: "POST",
      url: createMethodUrl(opts.baseUrl, method),
      header: acceptGzip(requestHeader(true, timeout, header)),
      contextValues: contextValues ?? createContextValues(),
      message: input,
    };
    return runUnary<I, O>(interceptors, req, signal, timeout, call);
  };

  async function call<I extends DescMessage, O extends DescMessage>(req: UnaryRequest<I, O>): Promise<UnaryResponse<I, O>> {
    const path = pathOf(req.url);
    if (req.signal.aborted) throw getAbortSignalReason(req.signal);
    const body = encodeEnvelope(toBinary(req.method.input, req.message));
    let stream: ClientHttp2Stream;
    try {
      stream = await opts.sessions.request("POST", path, toNodeHeaders(req.header), {});
    } catch (err) {
      throw errorFromNode(err);
    }
    return new Promise<UnaryResponse<I, O>>((resolve, reject) => {
      const reader = new UnaryEnvelopeReader(maxBytes);
      /** The answer's headers and trailers as Node gives them; as fetch Headers only once judged by connect's rules or read (answerOf). */
      let nodeHeader: IncomingHttpHeaders | undefined;
      let nodeTrailer: IncomingHttpHeaders | undefined;
      let header: Headers | undefined;
      /** An error status in the headers: a trailers-only answer. */
      let headerError: ConnectError | undefined;
      let settled = false;
      const settle = (err: unknown, res?: UnaryResponse<I, O>) => {
        if (settled) return;
        settled = true;
        req.signal.removeEventListener("abort", onAbort);
        if (err !== undefined) {
          // The server may still be sending: RST_STREAM(CANCEL) ends its work, as a gRPC client's cancel does.
          if (!stream.closed) stream.close(constants.NGHTTP2_CANCEL);
          reject(err);
        } else resolve(res as UnaryResponse<I, O>);
      };
      const onAbort = () => settle(getAbortSignalReason(req.signal));
      req.signal.addEventListener("abort", onAbort);
      if (req.signal.aborted) onAbort();
      let finishing = false;
      const finish = async () => {
        if (settled || finishing) return;
        finishing = true;
        try {
          // The usual answer (status 200, gRPC content type, no status in the headers, grpc-status 0 in the trailers) passes connect's
          // checks below without an error, so it is read without building its Headers first.
          if (header === undefined && nodeHeader !== undefined && nodeTrailer !== undefined && plainOk(nodeHeader, nodeTrailer)) {
            const encoding = nodeHeader["grpc-encoding"];
            const bytes = await reader.decoded(typeof encoding === "string" ? encoding : null);
            if (bytes !== undefined) {
              settle(undefined, answerOf(req, decodeAnswer(req.method.output, bytes), nodeHeader, nodeTrailer));
              return;
            }
          }
          const h = header ?? (nodeHeader ? toHeaders(nodeHeader) : new Headers());
          const t = nodeTrailer ? toHeaders(nodeTrailer) : new Headers();
          const bytes = await reader.decoded(h.get("grpc-encoding"));
          // An error status in the trailers wins, then one in the headers (trailers-only); a missing status or message is a protocol error.
          validateTrailer(t, h);
          if (bytes === undefined) throw headerError ?? new ConnectError("protocol error: missing output message for unary method", t.has("grpc-status") ? Code.Unimplemented : Code.Unknown);
          if (headerError) throw new ConnectError("protocol error: received output message for unary method with error status", Code.Unknown);
          settle(undefined, { stream: false, service: req.service, method: req.method, header: h, trailer: t, message: decodeAnswer(req.method.output, bytes) });
        } catch (err) {
          settle(err instanceof ConnectError ? err : ConnectError.from(err, Code.Internal));
        }
      };
      stream.on("response", (h: IncomingHttpHeaders) => {
        nodeHeader = h;
        // Headers connect's validateResponse would pass with no error are judged when the answer is complete (finish).
        if (plainOkHeader(h)) return;
        header = toHeaders(h);
        try {
          const status = Number(h[":status"] ?? 0);
          headerError = validateResponse(status, header).headerError;
        } catch (err) {
          settle(err);
        }
      });
      stream.on("data", (chunk: Buffer) => {
        opts.sessions.notifyResponseByteRead(stream);
        if (settled) return;
        try {
          reader.push(chunk);
        } catch (err) {
          settle(err);
        }
      });
      stream.on("trailers", (t: IncomingHttpHeaders) => {
        nodeTrailer = t;
        // Trailers come after the last DATA frame; should some of it still wait in the stream's buffer, 'end' follows it.
        if (stream.readableLength === 0) void finish();
      });
      // Without a status yet, the end may be a reset (the connection dropped): 'close' knows its code.
      stream.on("end", () => {
        if (nodeTrailer !== undefined || header?.has("grpc-status")) void finish();
      });
      stream.on("error", (err: unknown) => settle(errorFromNode(err)));
      stream.on("close", () => {
        if (settled) return;
        const reset = errorFromResetCode(stream.rstCode);
        if (reset) settle(reset);
        else void finish();
      });
      stream.end(body);
    });
  }
}

/**
 * Response headers connect's validateResponse passes with no error and no
 * header status: HTTP 200, a binary gRPC content type, no grpc-status (nor
 * its details). Anything else, repeated fields included, goes through it.
 */
function plainOkHeader(h: IncomingHttpHeaders): boolean {
  const type = h["content-type"];
  // Node gives the response's :status as a number (its IncomingHttpHeaders type says string).
  return (h[":status"] as unknown) === 200 && (type === "application/grpc" || type === "application/grpc+proto") && h["grpc-status"] === undefined && h["grpc-status-details-bin"] === undefined;
}

/** An answer validateResponse and validateTrailer pass with no error: plain headers, trailers with grpc-status "0" and no details. */
function plainOk(h: IncomingHttpHeaders, t: IncomingHttpHeaders): boolean {
  return plainOkHeader(h) && t["grpc-status"] === "0" && t["grpc-status-details-bin"] === undefined;
}

/** A successful answer whose header and trailer become fetch Headers only when read (an interceptor, onHeader, onTrailer). */
function answerOf<I extends DescMessage, O extends DescMessage>(req: UnaryRequest<I, O>, message: MessageShape<O>, h: IncomingHttpHeaders, t: IncomingHttpHeaders): UnaryResponse<I, O> {
  let header: Headers | undefined;
  let trailer: Headers | undefined;
  return {
    stream: false,
    service: req.service,
    method: req.method,
    message,
    get header() {
      return header ??= toHeaders(h);
    },
    get trailer() {
      return trailer ??= toHeaders(t);
    },
  };
}

/** Large answers come gzipped (shared/src/compression.ts): this client inflates gzip, and offers nothing else. */
function acceptGzip(h: Headers): Headers {
  h.set("grpc-accept-encoding", "gzip");
  return h;
}
