import { createServer as createNetServer, type Server, type Socket } from "node:net";
import { createServer as createHttp1Server, type IncomingMessage, type ServerResponse } from "node:http";
import { createSecureServer, createServer as createHttp2Server, type Http2ServerRequest, type Http2ServerResponse, type Http2Session } from "node:http2";
import { ADB_STREAM_WINDOW_BYTES, STREAM_WINDOW_BYTES, widenConnectionWindow } from "@farm/shared/http2-windows";

export type RequestHandler = (
  req: IncomingMessage | Http2ServerRequest,
  res: ServerResponse | Http2ServerResponse,
) => void;

const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

export interface DualServer {
  server: Server;
  /** Closes the listener and every open connection. */
  close(): Promise<void>;
  /** New certificate and key for new connections; open ones keep theirs. Only with TLS. */
  reload?(creds: TlsCredentials): void;
}

export interface TlsCredentials {
  cert: Buffer;
  key: Buffer;
}

/** How long a connection may take and sit idle; what it may open at once. */
export interface ConnectionLimits {
  /** From accept to a complete first request (TLS handshake, protocol sniff, HTTP/2 preface, HTTP/1.1 head). */
  requestTimeoutMs: number;
  /** A connection with no request in flight is closed after this (keep-alive). */
  idleTimeoutMs: number;
  /** HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS. */
  maxConcurrentStreams: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = { requestTimeoutMs: 10_000, idleTimeoutMs: 60_000, maxConcurrentStreams: 1000 };

/**
 * One TLS listener for HTTP/2 and HTTP/1.1, chosen by ALPN: gRPC clients
 * and agents negotiate h2, browsers either. A reload swaps the certificate
 * for new handshakes without touching established connections (agents stay
 * attached).
 */
export function createTlsServer(handler: RequestHandler, creds: TlsCredentials, limits: ConnectionLimits = DEFAULT_CONNECTION_LIMITS): DualServer {
  const server = createSecureServer(
    {
      cert: creds.cert,
      key: creds.key,
      allowHTTP1: true,
      ALPNProtocols: ["h2", "http/1.1"],
      handshakeTimeout: limits.requestTimeoutMs,
      unknownProtocolTimeout: limits.requestTimeoutMs,
      settings: { maxConcurrentStreams: limits.maxConcurrentStreams, initialWindowSize: STREAM_WINDOW_BYTES },
    },
    handler as (req: Http2ServerRequest, res: Http2ServerResponse) => void,
  );
  server.setTimeout(0);
  // HTTP/1.1 over TLS is served by Node's HTTP/1 machinery with these.
  Object.assign(server, http1Timeouts(limits));
  server.on("session", (session: Http2Session) => guardSession(session, limits));
  const sockets = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.setNoDelay(true);
  });
  return {
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
    reload: (next) => server.setSecureContext({ cert: next.cert, key: next.key }),
  };
}

/**
 * One cleartext listener for HTTP/2 (gRPC, prior knowledge) and HTTP/1.1
 * (Connect, browsers, /healthz): the first bytes of a connection tell which,
 * since every HTTP/2 connection opens with the fixed client preface.
 */
export function createDualServer(handler: RequestHandler, limits: ConnectionLimits = DEFAULT_CONNECTION_LIMITS): DualServer {
  const h1 = createHttp1Server(http1Timeouts(limits), handler as (req: IncomingMessage, res: ServerResponse) => void);
  const h2 = createHttp2Server({ settings: { maxConcurrentStreams: limits.maxConcurrentStreams, initialWindowSize: STREAM_WINDOW_BYTES } }, handler as (req: Http2ServerRequest, res: Http2ServerResponse) => void);
  h2.setTimeout(0);
  h2.on("session", (session: Http2Session) => guardSession(session, limits));
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.setNoDelay(true);
    sniff(socket, limits.requestTimeoutMs, (isHttp2) => (isHttp2 ? h2 : h1).emit("connection", socket));
  });
  // The HTTP/1 server never listens itself (it is handed sockets), but its
  // header-timeout checker starts on "listening": without it a half-sent
  // request head would hold its socket forever.
  server.once("listening", () => h1.emit("listening"));
  return {
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        h1.closeAllConnections();
        h1.close();
        for (const s of sockets) s.destroy();
      }),
  };
}

/** Node's HTTP/1 timeouts: the request head within the request timeout, keep-alive bounded. */
function http1Timeouts(limits: ConnectionLimits) {
  return {
    headersTimeout: limits.requestTimeoutMs,
    // The whole request (head and body); long streams are responses, not requests.
    requestTimeout: Math.max(limits.requestTimeoutMs, 300_000),
    keepAliveTimeout: limits.idleTimeoutMs,
    // How often those are checked: a fraction of the shortest, so they bite on time.
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.requestTimeoutMs / 4))),
  };
}

/**
 * An HTTP/2 connection must open its first stream within the request
 * timeout (a preface alone is not a request), and one with no stream open is
 * closed after the idle timeout. Agents' control streams stay open, so they
 * are never idle.
 */
function guardSession(session: Http2Session, limits: ConnectionLimits): void {
  widenConnectionWindow(session);
  let open = 0;
  let first = true;
  let timer: NodeJS.Timeout | undefined = setTimeout(() => session.destroy(), limits.requestTimeoutMs);
  timer.unref();
  session.on("stream", (stream, headers) => {
    if (first) narrowForAdbStreams(session, headers[":path"]);
    first = false;
    open++;
    clearTimeout(timer);
    timer = undefined;
    stream.once("close", () => {
      if (--open > 0 || session.destroyed) return;
      timer = setTimeout(() => session.close(), limits.idleTimeoutMs);
      timer.unref();
    });
  });
  session.once("close", () => clearTimeout(timer));
}

/** The calls that carry remote adb streams' bytes. */
const ADB_STREAM_PATHS = new Set(["/farm.v1.AdbTunnelService/OpenAdbStream", "/farm.v1.AgentAdbService/ServeAdbStream"]);

/**
 * Remote adb streams come on connections of their own (the CLI's and the
 * agent's adb transports), so a connection whose first call is one gets
 * small stream windows: a stream whose phone reads nothing then holds
 * ADB_STREAM_WINDOW_BYTES here, not STREAM_WINDOW_BYTES. Other connections
 * keep wide windows.
 */
function narrowForAdbStreams(session: Http2Session, path: string | string[] | undefined): void {
  if (typeof path !== "string" || !ADB_STREAM_PATHS.has(path) || session.destroyed) return;
  try {
    session.settings({ initialWindowSize: ADB_STREAM_WINDOW_BYTES });
  } catch {
    // Closing: nothing to narrow.
  }
}

function sniff(socket: Socket, timeoutMs: number, route: (isHttp2: boolean) => void): void {
  let seen = Buffer.alloc(0);
  // A connection that never says which protocol it speaks is closed.
  const timer = setTimeout(() => socket.destroy(), timeoutMs);
  timer.unref();
  const onData = (chunk: Buffer) => {
    seen = Buffer.concat([seen, chunk]);
    const n = Math.min(seen.length, preface.length);
    const matches = seen.subarray(0, n).equals(preface.subarray(0, n));
    if (matches && n < preface.length) return; // need more bytes to decide
    clearTimeout(timer);
    socket.off("data", onData);
    socket.pause();
    socket.unshift(seen);
    route(matches);
    // HTTP/2 drains the buffered bytes and reads the handle itself; the
    // HTTP/1 parser reads through the stream, which must flow again.
    if (!matches) socket.resume();
  };
  socket.on("data", onData);
  socket.once("close", () => clearTimeout(timer));
  socket.once("error", () => socket.destroy());
}
