import { connect, createServer, type Server, type Socket } from "node:net";

/**
 * A stand-in for an L4 load balancer (HAProxy in TCP mode) in front of
 * coordinator replicas: each connection goes to the next backend in turn,
 * skipping one that refuses it. HTTP/2 and gRPC pass through untouched.
 */
export interface TcpBalancer {
  url: string;
  /** How many client connections it has accepted so far. */
  readonly accepted: number;
  close(): Promise<void>;
}

export async function startTcpBalancer(backends: () => string[]): Promise<TcpBalancer> {
  let next = 0;
  let accepted = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    accepted++;
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.pause();
    const list = backends();
    const tryAt = (attempt: number) => {
      if (attempt >= list.length) return client.destroy();
      const target = new URL(list[(next + attempt) % list.length] as string);
      const upstream = connect({ host: target.hostname, port: Number(target.port) });
      sockets.add(upstream);
      upstream.on("close", () => sockets.delete(upstream));
      // Refused (that replica is down): the next one.
      upstream.once("error", () => tryAt(attempt + 1));
      upstream.once("connect", () => {
        next = (next + attempt + 1) % list.length;
        upstream.removeAllListeners("error");
        upstream.on("error", () => client.destroy());
        client.on("error", () => upstream.destroy());
        client.pipe(upstream).pipe(client);
        client.resume();
      });
    };
    tryAt(0);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    get accepted() {
      return accepted;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
