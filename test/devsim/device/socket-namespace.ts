import { connect, type Socket } from "node:net";

/** Opens a connection to whatever serves a device-side socket address. */
export type SocketConnector = () => Socket;

/**
 * Sockets served "on the device": `localabstract:NAME` (apps, e.g. an SDK
 * HTTP endpoint) and `tcp:PORT`. Each maps to a connector, usually a host
 * loopback port the simulator's own server listens on.
 */
export class SocketNamespace {
  private readonly sockets = new Map<string, { connector: SocketConnector; inode: number }>();
  private nextInode = 40_000;

  /** `address` is `localabstract:NAME` or `tcp:PORT`. */
  register(address: string, connector: SocketConnector): void {
    this.sockets.set(address, { connector, inode: this.nextInode++ });
  }

  /** Registers a host loopback port as the device socket. */
  registerPort(address: string, hostPort: number): void {
    this.register(address, () => connect({ host: "127.0.0.1", port: hostPort }));
  }

  unregister(address: string): void {
    this.sockets.delete(address);
  }

  /** Connector for a service name (`localabstract:x`, `tcp:80`, `tcp:80:localhost`), if something listens. */
  resolve(service: string): SocketConnector | undefined {
    const tcp = /^tcp:(\d+)(?::(?:localhost|127\.0\.0\.1))?$/.exec(service);
    const key = tcp ? `tcp:${tcp[1]}` : service;
    return this.sockets.get(key)?.connector;
  }

  /** /proc/net/unix, where tools find abstract sockets (`@NAME`). */
  procNetUnix(): string {
    const lines = ["Num       RefCount Protocol Flags    Type St Inode Path"];
    for (const [address, { inode }] of this.sockets) {
      if (!address.startsWith("localabstract:")) continue;
      lines.push(`0000000000000000: 00000002 00000000 00010000 0001 01 ${String(inode).padStart(5)} @${address.slice("localabstract:".length)}`);
    }
    return `${lines.join("\n")}\n`;
  }
}
