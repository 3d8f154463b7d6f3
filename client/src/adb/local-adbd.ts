import { createServer, type Server, type Socket } from "node:net";
import { formatBanner, UNKNOWN_DEVICE, type DeviceBanner } from "./adb-banner.js";
import { AdbdConnection } from "./adbd-connection.js";
import type { AdbStreamOpener } from "./adbd-stream.js";
import { isSameUserPeer } from "./peer-user.js";

export type { AdbStreamOpener } from "./adbd-stream.js";

export interface LocalAdbdOptions {
  /** Default 127.0.0.1: the endpoint is for this machine's adb server only. */
  host?: string;
  /** 0 (the default): any free port outside adb's own. */
  port?: number;
  /** What the adb server shows for the phone (model, features); default: an unknown phone with v1 services. */
  banner?: DeviceBanner;
  /** Opens one adb service on the phone (the coordinator's OpenAdbStream, or a test's bridge). */
  openStream: AdbStreamOpener;
  /** Diagnostics: refused streams, dropped connections. */
  log?: (line: string) => void;
  /** Which connections may use the phone; default: this user's and root's processes (peer-user.ts). */
  acceptPeer?: (socket: Socket) => boolean;
}

export interface LocalAdbd {
  host: string;
  port: number;
  /** What `adb connect` takes and `adb devices` lists: "127.0.0.1:PORT". */
  serial: string;
  /** Connections from adb servers right now. */
  connectionCount(): number;
  /** Stops listening and drops every connection: adb shows the phone offline, then gone. */
  close(): Promise<void>;
}

/**
 * Ports the adb server treats as its own: 5037 (its default) and the
 * emulator range, which it scans and would attach a second time as
 * emulator-N besides our 127.0.0.1:PORT.
 */
export function isAdbReservedPort(port: number): boolean {
  return port === 5037 || (port >= 5554 && port <= 5585);
}

/**
 * A local adbd-protocol endpoint: the user's adb server connects to it
 * (`adb connect 127.0.0.1:PORT`) and every stream it opens is handed to
 * openStream, so a phone elsewhere looks like a phone on the network.
 */
export async function startLocalAdbd(opts: LocalAdbdOptions): Promise<LocalAdbd> {
  const host = opts.host ?? "127.0.0.1";
  const log = opts.log ?? (() => undefined);
  const banner = formatBanner(opts.banner ?? UNKNOWN_DEVICE);
  const connections = new Set<AdbdConnection>();
  let closing = false;
  const onSocket = (socket: Socket) => {
    if (closing) {
      socket.destroy();
      return;
    }
    if (!(opts.acceptPeer ?? isSameUserPeer)(socket)) {
      log(`refused a connection from port ${socket.remotePort}: it belongs to another user`);
      socket.destroy();
      return;
    }
    const conn = new AdbdConnection(socket, { banner, openStream: opts.openStream, log });
    connections.add(conn);
    void conn.whenClosed().then(() => connections.delete(conn));
  };
  const server = await listenAvoidingReserved(host, opts.port ?? 0, onSocket);
  const address = server.address();
  const port = address && typeof address === "object" ? address.port : 0;
  let closed: Promise<void> | undefined;
  return {
    host,
    port,
    serial: `${host}:${port}`,
    connectionCount: () => connections.size,
    close: () => (closed ??= new Promise<void>((resolve) => {
      closing = true;
      server.close(() => resolve());
      for (const c of [...connections]) c.close();
    })),
  };
}

async function listenAvoidingReserved(host: string, port: number, onSocket: (s: Socket) => void): Promise<Server> {
  if (port !== 0 && isAdbReservedPort(port)) throw new RangeError(`port ${port} is one the adb server uses itself (5037, 5554-5585)`);
  for (let attempt = 0; attempt < 20; attempt++) {
    const server = createServer({ noDelay: true }, onSocket);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ host, port, exclusive: true }, () => {
        server.off("error", reject);
        resolve();
      });
    });
    const address = server.address();
    const bound = address && typeof address === "object" ? address.port : 0;
    if (port !== 0 || !isAdbReservedPort(bound)) return server;
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  throw new Error("no free port outside the adb server's own ranges");
}
