import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import type { ContextValues, MethodImplSpec } from "@connectrpc/connect";
import { parseTimeout } from "@connectrpc/connect/protocol-grpc";
import { toHeaders } from "@farm/shared/grpc-unary/h2-headers";
import { leanHandlerContext, type LeanHandlerContext } from "@farm/shared/lean-handler-context";

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

/**
 * What Connect's gRPC handler makes of a call's request before serving it:
 * its headers, its grpc-timeout (a bad one fails the call where Connect
 * would) and the handler context the implementation is given (the same
 * fields and signal as Connect's createHandlerContext, made with less:
 * lean-handler-context.ts).
 */
export function fastPathCall(req: Http2ServerRequest, spec: MethodImplSpec, contextValues: ContextValues): { header: Headers; timeout: ReturnType<typeof parseTimeout>; context: LeanHandlerContext } {
  const header = toHeaders(req.headers);
  const timeout = parseTimeout(header.get("grpc-timeout"), Number.MAX_SAFE_INTEGER);
  const context = leanHandlerContext({
    method: spec.method,
    service: spec.method.parent,
    requestMethod: "POST",
    protocolName: "grpc",
    timeoutMs: timeout.timeoutMs,
    requestHeader: header,
    url: `${req.stream.session?.encrypted === true ? "https" : "http"}://${req.authority}${req.url}`,
    responseHeader: { "content-type": "application/grpc+proto" },
    responseTrailer: { "grpc-status": "0" },
    contextValues,
  });
  return { header, timeout, context };
}
