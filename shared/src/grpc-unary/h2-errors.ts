import { constants } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";

/** HTTP/2 RST_STREAM codes as gRPC reads them (PROTOCOL-HTTP2.md, "Errors"); NO_ERROR and STREAM_CLOSED carry no status. */
const RESET_CODES: Record<number, [string, Code]> = {
  [constants.NGHTTP2_PROTOCOL_ERROR]: ["PROTOCOL_ERROR", Code.Internal],
  [constants.NGHTTP2_INTERNAL_ERROR]: ["INTERNAL_ERROR", Code.Internal],
  [constants.NGHTTP2_FLOW_CONTROL_ERROR]: ["FLOW_CONTROL_ERROR", Code.Internal],
  [constants.NGHTTP2_SETTINGS_TIMEOUT]: ["SETTINGS_TIMEOUT", Code.Internal],
  [constants.NGHTTP2_FRAME_SIZE_ERROR]: ["FRAME_SIZE_ERROR", Code.Internal],
  [constants.NGHTTP2_REFUSED_STREAM]: ["REFUSED_STREAM", Code.Unavailable],
  [constants.NGHTTP2_CANCEL]: ["CANCEL", Code.Canceled],
  [constants.NGHTTP2_COMPRESSION_ERROR]: ["COMPRESSION_ERROR", Code.Internal],
  [constants.NGHTTP2_CONNECT_ERROR]: ["CONNECT_ERROR", Code.Internal],
  [constants.NGHTTP2_ENHANCE_YOUR_CALM]: ["ENHANCE_YOUR_CALM", Code.ResourceExhausted],
  [constants.NGHTTP2_INADEQUATE_SECURITY]: ["INADEQUATE_SECURITY", Code.PermissionDenied],
  [constants.NGHTTP2_HTTP_1_1_REQUIRED]: ["HTTP_1_1_REQUIRED", Code.PermissionDenied],
};

/** A stream reset by the peer (or with its session), in the words connect-node uses, so callers that read them keep working. */
export function errorFromResetCode(rstCode: number | undefined): ConnectError | undefined {
  const known = rstCode === undefined ? undefined : RESET_CODES[rstCode];
  if (!known || rstCode === undefined) return undefined;
  return new ConnectError(`http/2 stream closed with error code ${known[0]} (0x${rstCode.toString(16)})`, known[1]);
}

/** A Node error on the way (socket, session, stream) with the status gRPC clients give it. */
export function errorFromNode(reason: unknown): ConnectError {
  if (reason instanceof ConnectError) return reason;
  const codes = new Set<string>();
  for (let e: unknown = reason, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const c = (e as { code?: unknown }).code;
    if (typeof c === "string") codes.add(c);
  }
  const code = ["ETIMEDOUT", "ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED"].some((c) => codes.has(c))
    ? Code.Unavailable
    : ["ERR_STREAM_DESTROYED", "ERR_HTTP2_INVALID_STREAM", "ECONNRESET", "ERR_STREAM_WRITE_AFTER_END"].some((c) => codes.has(c))
    ? Code.Aborted
    : Code.Internal;
  return ConnectError.from(reason, code);
}
