import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { constants as h2constants, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import type { ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, endStreamFlag, endStreamToJson, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

/**
 * Answers an RPC with an error from its headers alone, in the protocol the
 * caller speaks (gRPC, gRPC-Web, Connect streaming or unary), and never
 * reads its body: on HTTP/2 the stream is then reset with NO_ERROR (RFC 9113
 * §8.1, "stop sending"), on HTTP/1.1 the connection is closed after the
 * answer. Memory stays flat however much the client meant to send.
 */
export function refuseRpc(req: Req, res: Res, err: ConnectError): void {
  const contentType = String(req.headers["content-type"] ?? "");
  let status = 200;
  let headers: Record<string, string> = {};
  let body: Uint8Array = new Uint8Array(0);
  if (/^application\/grpc(-web)?(\+|;|$|-text)/i.test(contentType)) {
    // gRPC and gRPC-Web: a trailers-only answer, the status in the headers.
    const h = new Headers({ "content-type": contentType });
    setTrailerStatus(h, err);
    headers = Object.fromEntries(h);
  } else if (/^application\/connect\+/i.test(contentType)) {
    // Connect streaming: a single end-of-stream message carrying the error.
    const json = new TextEncoder().encode(JSON.stringify(endStreamToJson(new Headers(), err, undefined)));
    body = new Uint8Array(5 + json.length);
    body[0] = endStreamFlag;
    new DataView(body.buffer).setUint32(1, json.length);
    body.set(json, 5);
    headers = { "content-type": contentType };
  } else {
    // Connect unary (and anything else): an HTTP status with a JSON error.
    status = codeToHttpStatus(err.code);
    body = errorToJsonBytes(err, {});
    headers = { "content-type": "application/json" };
  }
  sendWithoutReading(req, res, status, headers, body);
}

/** A plain HTTP answer to a request whose body is never read (dashboard and other non-RPC paths). */
export function refuseHttp(req: Req, res: Res, status: number, report: { code: string; message: string; field?: string }): void {
  sendWithoutReading(req, res, status, { "content-type": "application/json" }, new TextEncoder().encode(JSON.stringify(report)));
}

function sendWithoutReading(req: Req, res: Res, status: number, headers: Record<string, string>, body: Uint8Array): void {
  if (req.httpVersionMajor === 2) {
    const stream = (req as Http2ServerRequest).stream;
    const stop = () => {
      if (!stream.closed && !stream.destroyed) stream.close(h2constants.NGHTTP2_NO_ERROR);
    };
    if (stream.destroyed || stream.headersSent) return stop();
    if (body.length === 0) {
      stream.respond({ ":status": status, ...headers }, { endStream: true });
      stop();
    } else {
      stream.respond({ ":status": status, ...headers, "content-length": String(body.length) });
      stream.end(body, stop);
    }
    return;
  }
  const r = res as ServerResponse;
  if (r.socket) stagedClose(r.socket);
  // "Connection: close": Node ends the connection once the answer is
  // written instead of reading the rest of the body to keep it.
  r.writeHead(status, { ...headers, "content-length": String(body.length), connection: "close" });
  r.end(body);
}

/** How long a refused HTTP/1.1 client has to read its answer before the connection is reset. */
const LINGER_MS = 1_000;

/**
 * A staged close (RFC 9112 §9.6): closing at once with an unread body in
 * the socket makes the kernel send a reset that can destroy the answer
 * before the client reads it. So once the answer is written (Node then
 * calls destroySoon), send FIN, stop reading (the client's writes stall on
 * flow control; nothing more is read or buffered here), and reset only
 * after a moment.
 */
function stagedClose(socket: Socket): void {
  socket.destroySoon = () => {
    socket.end();
    socket.pause();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once("close", () => clearTimeout(timer));
  };
}
