import { constants, type ClientHttp2Stream, type IncomingHttpHeaders } from "node:http2";
import { promisify } from "node:util";
import { gunzip } from "node:zlib";
import { fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type Interceptor, type StreamRequest, type StreamResponse, type Transport } from "@connectrpc/connect";
import { createMethodUrl, getAbortSignalReason, runStreamingCall } from "@connectrpc/connect/protocol";
import { requestHeader, validateResponse, validateTrailer } from "@connectrpc/connect/protocol-grpc";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import { errorFromNode, errorFromResetCode } from "../grpc-unary/h2-errors.js";
import { toHeaders, toNodeHeaders } from "../grpc-unary/h2-headers.js";
import { EnvelopeInbox, type Envelope } from "./envelope-inbox.js";
import { bytesEnvelope } from "./bytes-envelope.js";
import { envelopeOf, writeEnvelopes } from "./write-envelopes.js";
import { requestPaths } from "../grpc-unary/request-paths.js";

const gunzipAsync = promisify(gunzip);

/** What one streamed message may hold unless the caller says otherwise: far above any farm message, far below what would hurt the client. */
export const STREAM_MESSAGE_MAX_BYTES = 64 * 1024 * 1024;
/** Whole messages a stream holds unread before its HTTP/2 stream is paused (flow control then holds the sender). */
export const STREAM_HIGH_WATER_BYTES = 1024 * 1024;

export interface GrpcStreamOptions {
  baseUrl: string;
  /** The kept HTTP/2 session(s), shared with the unary calls. */
  sessions: Http2SessionManager;
  interceptors?: Interceptor[];
  /** A response message longer than this is refused from its length prefix, before its bytes are held. */
  readMaxBytes?: number;
  highWaterBytes?: number;
}

export type StreamFn = Transport["stream"];

/**
 * gRPC streaming calls (server-streaming, client-streaming, bidi) framed by
 * hand on a kept `node:http2` session, in place of connect-node's pipes of
 * async iterables: each message is written as one envelope (waiting for
 * 'drain' when the peer reads slowly) and each answer read from DATA
 * chunks straight into messages (pausing the stream when the caller reads
 * slowly). Interceptors, deadlines, cancellation and the request
 * iterable's return/throw are connect's own (runStreamingCall); statuses,
 * trailers-only errors and resets are judged by connect's gRPC rules, so
 * callers see the same errors as with createGrpcTransport.
 */
export function grpcStream(opts: GrpcStreamOptions): StreamFn {
  const maxBytes = opts.readMaxBytes ?? STREAM_MESSAGE_MAX_BYTES;
  const highWaterBytes = opts.highWaterBytes ?? STREAM_HIGH_WATER_BYTES;
  const interceptors = opts.interceptors ?? [];
  const pathOf = requestPaths(opts.baseUrl);

  return function stream(method, signal, timeoutMs, header, input, contextValues) {
    const timeout = timeoutMs === undefined || timeoutMs <= 0 ? undefined : timeoutMs;
    const h = requestHeader(true, timeout, header);
    h.set("grpc-accept-encoding", "gzip");
    return runStreamingCall({
      interceptors,
      signal,
      timeoutMs: timeout,
      req: {
        stream: true,
        service: method.parent,
        method,
        requestMethod: "POST",
        url: createMethodUrl(opts.baseUrl, method),
        header: h,
        contextValues: contextValues ?? createContextValues(),
        message: input,
      },
      next: call,
    }) as ReturnType<StreamFn>;
  } as StreamFn;

  async function call<I extends DescMessage, O extends DescMessage>(req: StreamRequest<I, O>): Promise<StreamResponse<I, O>> {
    const path = pathOf(req.url);
    if (req.signal.aborted) throw getAbortSignalReason(req.signal);
    let stream: ClientHttp2Stream;
    try {
      stream = await opts.sessions.request("POST", path, toNodeHeaders(req.header), {});
    } catch (err) {
      throw errorFromNode(err);
    }
    const cancel = () => {
      if (!stream.closed && !stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
    };
    const inbox = new EnvelopeInbox({ maxBytes, highWaterBytes, pause: () => stream.pause(), resume: () => stream.resume() });
    const trailer = new Headers();
    let nodeError: unknown;
    const onAbort = () => {
      inbox.fail(ConnectError.from(getAbortSignalReason(req.signal)), true);
      cancel();
    };
    req.signal.addEventListener("abort", onAbort);
    // Aborted while the stream was being opened: no 'abort' event is left to come.
    if (req.signal.aborted) onAbort();
    stream.on("data", (chunk: Buffer) => {
      opts.sessions.notifyResponseByteRead(stream);
      try {
        inbox.push(chunk);
      } catch (err) {
        inbox.fail(err);
        cancel();
      }
    });
    /** A status came (trailers, or a trailers-only answer's headers): the end that follows is the answer's end. */
    let statusSeen = false;
    stream.on("trailers", (t: IncomingHttpHeaders) => {
      statusSeen = true;
      toHeaders(t).forEach((v, k) => trailer.append(k, v));
    });
    // Node ends the readable side on a reset too (before 'aborted'): without a status, 'close' tells which it was.
    stream.on("end", () => {
      if (statusSeen) inbox.end();
    });
    stream.on("error", (err: unknown) => (nodeError ??= err));
    const closed = new Promise<ConnectError>((resolve) =>
      stream.once("close", () => {
        req.signal.removeEventListener("abort", onAbort);
        const err = errorFromResetCode(stream.rstCode) ?? (nodeError === undefined ? undefined : errorFromNode(nodeError));
        // Closed cleanly without a status: the messages end here and the missing status is judged by connect's rules.
        if (err === undefined) inbox.end();
        else inbox.fail(err);
        resolve(err ?? new ConnectError("the stream closed before an answer", Code.Unavailable));
      })
    );
    // The request side: its messages as they come, each one envelope; a failing request iterable cancels the call.
    writeEnvelopes(req.message, stream, (m) => bytesEnvelope(req.method.input, m) ?? envelopeOf(toBinary(req.method.input, m))).then(
      () => {
        if (!stream.closed && !stream.destroyed && !stream.writableEnded) stream.end();
      },
      (err: unknown) => {
        // The stream closed under the writer: the answer's side tells how.
        if (stream.closed || stream.destroyed) return;
        inbox.fail(ConnectError.from(err));
        cancel();
      },
    );
    const headers = await Promise.race([new Promise<IncomingHttpHeaders>((resolve) => stream.once("response", resolve)), closed.then((err) => Promise.reject(err))]);
    const resHeader = toHeaders(headers);
    let foundStatus: boolean;
    try {
      const v = validateResponse(Number(headers[":status"] ?? 0), resHeader);
      foundStatus = v.foundStatus;
      if (foundStatus) statusSeen = true;
      if (v.headerError) throw v.headerError;
    } catch (err) {
      cancel();
      throw err;
    }
    const encoding = resHeader.get("grpc-encoding");
    const decode = async (env: Envelope): Promise<MessageShape<O>> => {
      let data: Uint8Array = env.data;
      if ((env.flags & ~1) !== 0) throw new ConnectError(`protocol error: unexpected message flags 0x${env.flags.toString(16)}`, Code.Internal);
      if ((env.flags & 1) === 1) data = await inflate(data, encoding, maxBytes);
      try {
        return fromBinary(req.method.output, data);
      } catch (e) {
        throw new ConnectError(`parse binary: ${e instanceof Error ? e.message : String(e)}`, Code.Internal);
      }
    };
    async function* messages(): AsyncGenerator<MessageShape<O>, void, undefined> {
      try {
        for (let env = await inbox.next(); env !== undefined; env = await inbox.next()) yield await decode(env);
        if (!foundStatus) validateTrailer(trailer, resHeader);
      } catch (err) {
        cancel();
        throw ConnectError.from(err);
      }
    }
    return { ...req, header: resHeader, trailer, message: messages() } as unknown as StreamResponse<I, O>;
  }
}

async function inflate(data: Uint8Array, encoding: string | null, maxBytes: number): Promise<Uint8Array> {
  if (encoding !== "gzip") {
    throw new ConnectError(`protocol error: the server sent a compressed message with encoding ${JSON.stringify(encoding ?? "")}, but this client accepts only gzip`, Code.Internal);
  }
  try {
    return await gunzipAsync(data, { maxOutputLength: maxBytes });
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") throw new ConnectError(`message is larger than configured readMaxBytes ${maxBytes} after decompression`, Code.ResourceExhausted);
    throw new ConnectError(`protocol error: the gzipped message could not be inflated: ${(err as Error).message}`, Code.Internal);
  }
}
