import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";

/**
 * The route a fast path serves this request by, or undefined for Connect's
 * handler: only binary gRPC over HTTP/2 with uncompressed requests is framed
 * by hand (Connect, gRPC-Web, HTTP/1.1, JSON and compression stay Connect's).
 */
export function fastPathRoute<R>(req: IncomingMessage | Http2ServerRequest, routes: { get(path: string): R | undefined }): R | undefined {
  if (req.httpVersionMajor !== 2 || req.method !== "POST") return undefined;
  const route = routes.get((req.url ?? "").split("?", 1)[0] ?? "");
  const type = req.headers["content-type"];
  const encoding = req.headers["grpc-encoding"];
  if (!route || (type !== "application/grpc" && type !== "application/grpc+proto") || (encoding !== undefined && encoding !== "identity")) return undefined;
  return route;
}
