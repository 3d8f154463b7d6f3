import type { IncomingMessage } from "node:http";
import { constants as h2constants, type Http2ServerRequest } from "node:http2";
import { ConnectError } from "@connectrpc/connect";
import { Errors, farmError, toErrorReport } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { authenticateNodeHeaders, requireSafeTransport, type ReplicaVerifier } from "../auth/auth.js";
import type { RequestHandler } from "./http-server.js";
import { BLOB_MAX_BYTES } from "../evidence/blob-store.js";
import { limitsOf, plainBodyMax } from "./message-limits.js";
import { peerOf } from "./peer.js";
import { refuseHttp, refuseRpc } from "./rpc-refusal.js";
import type { Principal, TokenStore } from "../auth/token-store.js";
import type { WebSessions } from "../auth/web-sessions.js";
import { stageTrace, TRACE_HEADER } from "@farm/shared/stage-trace";
import { headersOf } from "./request-headers.js";

export interface RequestGateOptions {
  tokens: TokenStore;
  web?: WebSessions;
  /** Other coordinator replicas' credentials (replicas on PostgreSQL). */
  replicas?: ReplicaVerifier;
  insecure: boolean;
  /** Whether a method ("pkg.Service/Method") is served without credentials (health). */
  isOpen(method: string): boolean;
  /** A path (not an RPC) whose body cap is not PLAIN_BODY_MAX_BYTES (the WebDriver endpoint applies its own, from Content-Length, before reading). */
  plainBodyCapOf?(pathname: string): number | undefined;
  /** Calls one token (or dashboard user) may have in flight at once. */
  maxStreamsPerPrincipal: number;
  log: Logger;
}

/** Calls one token may have in flight: CI fleets share a token, so not small. */
export const DEFAULT_MAX_STREAMS_PER_PRINCIPAL = 1024;

/** "/pkg.Service/Method": a package-qualified service (a dashboard path like /dashboard/devices is not one). */
const rpcPath = /^\/([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\/([A-Za-z_]\w*)$/;

/**
 * Limits before work, at the HTTP layer, before any byte of a body is read
 * (Connect reads a unary body before its interceptors run): a body larger
 * than its method may carry is refused from Content-Length; an RPC that
 * needs credentials is refused unless its headers carry a valid token or
 * dashboard session; one caller may have only so many calls in flight. The
 * auth interceptor still decides what an authenticated caller may do.
 */
export function requestGate(handler: RequestHandler, opts: RequestGateOptions): RequestHandler {
  const inFlight = new Map<string, number>();
  return (req, res) => {
    // The routing benchmark's marks (stage-trace.ts): the request's headers are parsed; its credentials are checked.
    const tid = stageTrace && (req.headers[TRACE_HEADER] as string | undefined);
    if (tid) stageTrace?.mark(tid, "co.h2");
    const path = (req.url ?? "").split("?", 1)[0] ?? "";
    const m = rpcPath.exec(path);
    const announced = contentLength(req);
    if (!m) {
      // The dashboard's file upload is the one plain request with a large body (its handler applies its own limit); the WebDriver endpoint sets its own.
      const cap = opts.plainBodyCapOf?.(path) ?? plainBodyMax(path);
      if (announced !== undefined && announced > cap) {
        return refuseHttp(req, res, 413, { code: Errors.MESSAGE_TOO_LARGE.code, message: `request bodies here are at most ${cap} bytes`, field: "content-length" });
      }
      return handler(req, res);
    }
    const service = m[1] as string;
    const method = `${service}/${m[2] as string}`;
    const limits = limitsOf(service);
    const tooLarge = () => refuseRpc(req, res, farmError(Errors.MESSAGE_TOO_LARGE, `${method} takes at most ${limits.bodyMaxBytes} bytes; the request announces ${announced}`, "content-length"));
    if (opts.isOpen(method)) {
      if (announced !== undefined && announced > limits.bodyMaxBytes) return tooLarge();
      return handler(req, res);
    }
    try {
      requireSafeTransport(peerOf(req), opts.insecure);
    } catch (err) {
      return refuseRpc(req, res, ConnectError.from(err));
    }
    // Set once the call is counted in flight; the caller may leave while its credentials are checked.
    let key: string | undefined;
    let closed = false;
    res.once("close", () => {
      closed = true;
      if (key === undefined) return;
      const left = (inFlight.get(key) ?? 1) - 1;
      if (left > 0) inFlight.set(key, left);
      else inFlight.delete(key);
    });
    // The credentials are checked (in the database) while the body waits unread: nothing reads it before handler().
    const admit = async () => {
      let principal: Principal;
      try {
        principal = await authenticateNodeHeaders(opts.tokens, req.headers, () => headersOf(req), opts.web, opts.replicas);
      } catch (err) {
        if (refusedCodes.has(toErrorReport(err).code)) return refuseRpc(req, res, ConnectError.from(err));
        opts.log.error("could not check a caller's credentials", { method, error: err instanceof Error ? err.message : String(err) });
        return refuseRpc(req, res, farmError(Errors.INTERNAL, "the coordinator could not check the credentials; try again"));
      }
      if (closed) return;
      if (announced !== undefined && announced > limits.bodyMaxBytes) return tooLarge();
      const counted = `${principal.kind}:${principal.tokenName}`;
      const n = inFlight.get(counted) ?? 0;
      if (n >= opts.maxStreamsPerPrincipal) {
        opts.log.warn("call refused: too many in flight for one token", { principal: principal.tokenName, method, inFlight: n });
        return refuseRpc(req, res, farmError(Errors.TOO_MANY_STREAMS, `this token already has ${n} calls in flight (at most ${opts.maxStreamsPerPrincipal}); wait for some to end`));
      }
      inFlight.set(counted, n + 1);
      key = counted;
      if (req.httpVersionMajor === 2) stopUnreadBody(req as Http2ServerRequest);
      if (tid) stageTrace?.mark(tid, "co.admit");
      handler(req, res);
    };
    admit().catch((err: unknown) => {
      opts.log.error("request gate failed", { method, error: err instanceof Error ? err.message : String(err) });
      if (!closed) req.destroy();
    });
  };
}

/** Why the gate refuses a caller itself; any other failure to check credentials is the coordinator's. */
const refusedCodes = new Set<string>([Errors.UNAUTHENTICATED.code, Errors.PERMISSION_DENIED.code]);

/**
 * Once the answer is sent, a client still sending (a message over the cap
 * was refused mid-body) is told to stop with RST_STREAM NO_ERROR (RFC 9113
 * §8.1); otherwise Node ends the stream on its side only and the client's
 * stream hangs against flow control. The reset follows the trailers (the
 * status): Node sends them on "wantTrailers", the reset goes after them.
 */
function stopUnreadBody(req: Http2ServerRequest): void {
  req.stream.once("wantTrailers", () =>
    setImmediate(() => {
      if (!req.readableEnded && !req.stream.closed && !req.stream.destroyed) req.stream.close(h2constants.NGHTTP2_NO_ERROR);
    }));
}

/** The announced body size; undefined when none is announced (chunked, HTTP/2 without one). */
function contentLength(req: IncomingMessage | Http2ServerRequest): number | undefined {
  const v = req.headers["content-length"];
  if (typeof v !== "string" || v === "") return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : Number.MAX_SAFE_INTEGER;
}
