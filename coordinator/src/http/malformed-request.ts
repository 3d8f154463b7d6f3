import { Code, ConnectError } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { Errors, refusal } from "@farm/shared/errors";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import type { Logger } from "@farm/shared/log";

/**
 * Connect reports a request it cannot read as its own INTERNAL failure:
 * bytes that are no protobuf message ("parse binary: ..."), a compressed
 * envelope where no compression was negotiated. Both are the caller's
 * mistake: INVALID_ARGUMENT, refused before anything ran.
 */
const malformed = /^(parse binary: |received compressed envelope, but do not know how to decompress)/;

/** The caller's error for a request Connect could not read, or undefined for any other failure. */
export function malformedRequestError(err: ConnectError): ConnectError | undefined {
  if (err.code !== Code.Internal || err.findDetails(ErrorDetailSchema).length > 0 || !malformed.test(err.rawMessage)) return undefined;
  return refusal(Errors.INVALID_ARGUMENT, `the request could not be read: ${err.rawMessage}`);
}

/** Logged at warn: a client's bug, not this host's failure. */
export function logMalformed(log: Logger, method: string, err: ConnectError): void {
  log.warn("malformed request refused", { method, error: err.rawMessage });
}

/**
 * A unary request is parsed before any interceptor runs, so its parse
 * failure never reaches errorLogInterceptor: it is corrected here, in the
 * answer, for gRPC (the trailers), gRPC-Web (the trailer frame at the end
 * of the body) and Connect unary (the JSON error).
 * Streamed requests are parsed inside the call and corrected there.
 */
export function withMalformedRequests(handler: UniversalHandler, log: Logger): UniversalHandler {
  if (handler.method.methodKind !== "unary") return handler;
  const method = `${handler.service.typeName}/${handler.method.name}`;
  const wrapped = async (req: Parameters<UniversalHandler>[0]): Promise<UniversalServerResponse> => {
    const res = await handler(req);
    const body = res.body;
    if (body === undefined) return res;
    if (res.status === 500 && /^application\/json/.test(res.header?.get("content-type") ?? "")) {
      // Connect unary: the error is the whole (small) JSON body.
      const chunks: Uint8Array[] = [];
      for await (const chunk of body) chunks.push(chunk);
      const bytes = Buffer.concat(chunks);
      const fixed = malformedRequestError(errorFromJsonBytes(bytes, undefined, new ConnectError("", Code.Unknown)));
      if (fixed) logMalformed(log, method, fixed);
      const answer = fixed ? errorToJsonBytes(fixed, {}) : bytes;
      const header = new Headers(res.header);
      if (header.has("content-length")) header.set("content-length", String(answer.byteLength));
      return {
        ...res,
        header,
        status: fixed ? codeToHttpStatus(fixed.code) : res.status,
        body: (async function* () {
          yield answer;
        })(),
      };
    }
    if (/^application\/grpc-web/.test(res.header?.get("content-type") ?? "")) {
      // gRPC-Web: the trailers are the body's last frame. A unary answer is
      // one small message at most, so it is read whole and its trailer frame
      // rewritten.
      const chunks: Uint8Array[] = [];
      for await (const chunk of body) chunks.push(chunk);
      const answer = fixGrpcWebTrailer(Buffer.concat(chunks), log, method);
      return {
        ...res,
        body: (async function* () {
          yield answer;
        })(),
      };
    }
    const trailer = res.trailer;
    if (!trailer) return res;
    return {
      ...res,
      body: (async function* () {
        yield* body;
        // The trailers are written once the body ends: set them right before.
        const err = findTrailerError(trailer);
        const fixed = err ? malformedRequestError(err) : undefined;
        if (fixed) {
          logMalformed(log, method, fixed);
          setTrailerStatus(trailer, fixed);
        }
      })(),
    };
  };
  return Object.assign(wrapped, {
    protocolNames: handler.protocolNames,
    allowedMethods: handler.allowedMethods,
    supportedContentType: handler.supportedContentType,
    requestPath: handler.requestPath,
    service: handler.service,
    method: handler.method,
  });
}

/** A gRPC-Web body with its trailer frame corrected when it reports a request that could not be read. */
function fixGrpcWebTrailer(bytes: Buffer, log: Logger, method: string): Uint8Array {
  let at = 0;
  while (at + 5 <= bytes.length) {
    const flags = bytes[at]!;
    const length = bytes.readUInt32BE(at + 1);
    if (at + 5 + length > bytes.length) break;
    if (flags & trailerFlag) {
      const trailer = trailerParse(bytes.subarray(at + 5, at + 5 + length));
      const err = findTrailerError(trailer);
      const fixed = err ? malformedRequestError(err) : undefined;
      if (!fixed) return bytes;
      logMalformed(log, method, fixed);
      const fresh = new Headers();
      setTrailerStatus(fresh, fixed);
      const frame = trailerSerialize(fresh);
      const head = Buffer.alloc(5);
      head[0] = trailerFlag;
      head.writeUInt32BE(frame.byteLength, 1);
      return Buffer.concat([bytes.subarray(0, at), head, frame]);
    }
    at += 5 + length;
  }
  return bytes;
}
