import { createServer, type Http2Server, type Http2ServerRequest, type Http2ServerResponse, type ServerHttp2Session } from "node:http2";

/**
 * A plain-HTTP/2 test server on a free loopback port serving `handler`;
 * `stop` destroys its open sessions (a client's kept session would hold
 * `close` open) and resolves once it has closed.
 */
export async function listenH2(handler: (req: Http2ServerRequest, res: Http2ServerResponse) => void): Promise<{ url: string; stop: () => Promise<void> }> {
  const server: Http2Server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = address && typeof address === "object" ? address.port : 0;
  const sessions = new Set<ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sessions) s.destroy();
        server.close(() => resolve());
      }),
  };
}
