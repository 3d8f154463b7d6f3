import { createServer as createNetServer, type Server, type Socket } from "node:net";
import { createServer as createHttp1Server, type IncomingMessage, type ServerResponse } from "node:http";
import { createSecureServer, createServer as createHttp2Server, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";

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

/**
 * One TLS listener for HTTP/2 and HTTP/1.1, chosen by ALPN: gRPC clients
 * and agents negotiate h2, browsers either. A reload swaps the certificate
 * for new handshakes without touching established connections (agents stay
 * attached).
 */
export function createTlsServer(handler: RequestHandler, creds: TlsCredentials): DualServer {
  const server = createSecureServer({ cert: creds.cert, key: creds.key, allowHTTP1: true, ALPNProtocols: ["h2", "http/1.1"] }, handler as (req: Http2ServerRequest, res: Http2ServerResponse) => void);
  server.setTimeout(0);
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
export function createDualServer(handler: RequestHandler): DualServer {
  const h1 = createHttp1Server(handler as (req: IncomingMessage, res: ServerResponse) => void);
  const h2 = createHttp2Server({}, handler as (req: Http2ServerRequest, res: Http2ServerResponse) => void);
  // Agents keep their control stream open indefinitely.
  h1.keepAliveTimeout = 65_000;
  h2.setTimeout(0);
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.setNoDelay(true);
    sniff(socket, (isHttp2) => (isHttp2 ? h2 : h1).emit("connection", socket));
  });
  return {
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        h1.closeAllConnections();
        for (const s of sockets) s.destroy();
      }),
  };
}

function sniff(socket: Socket, route: (isHttp2: boolean) => void): void {
  let seen = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    seen = Buffer.concat([seen, chunk]);
    const n = Math.min(seen.length, preface.length);
    const matches = seen.subarray(0, n).equals(preface.subarray(0, n));
    if (matches && n < preface.length) return; // need more bytes to decide
    socket.off("data", onData);
    socket.pause();
    socket.unshift(seen);
    route(matches);
    // HTTP/2 drains the buffered bytes and reads the handle itself; the
    // HTTP/1 parser reads through the stream, which must flow again.
    if (!matches) socket.resume();
  };
  socket.on("data", onData);
  socket.once("error", () => socket.destroy());
}
