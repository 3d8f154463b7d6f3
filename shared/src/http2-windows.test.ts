import { createServer, type ClientHttp2Session, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { CONNECTION_WINDOW_BYTES, STREAM_WINDOW_BYTES, wideWindowSessions } from "./http2-windows.js";

let server: Http2Server | undefined;
afterEach(async () => {
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

describe("client sessions with wide windows", () => {
  it("let the server send a wide window per stream and per connection", async () => {
    const sessions: ServerHttp2Session[] = [];
    server = createServer();
    server.on("session", (s) => sessions.push(s));
    server.on("stream", (stream) => {
      stream.respond({ ":status": 200 });
      stream.end();
    });
    await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const manager = wideWindowSessions(url, {}, {});
    const stream = await manager.request("POST", "/x", {}, {});
    stream.resume();
    await new Promise((resolve) => stream.once("close", resolve));
    const peer = sessions[0] as ServerHttp2Session;
    // What the server may send us: the stream window from our settings, the connection's from our WINDOW_UPDATE.
    expect(peer.remoteSettings.initialWindowSize).toBe(STREAM_WINDOW_BYTES);
    expect(peer.state.remoteWindowSize).toBeGreaterThanOrEqual(CONNECTION_WINDOW_BYTES);
    manager.abort();
  });

  it("widen the connection window of each new connection too, once per connection", async () => {
    const sessions: ServerHttp2Session[] = [];
    server = createServer();
    server.on("session", (s) => {
      sessions.push(s);
      s.on("error", () => {});
    });
    server.on("stream", (stream) => {
      stream.respond({ ":status": 200 });
      stream.end();
    });
    await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const manager = wideWindowSessions(url, {}, {});
    const call = async () => {
      const stream = await manager.request("POST", "/x", {}, {});
      const session = stream.session as ClientHttp2Session;
      stream.resume();
      await new Promise((resolve) => stream.once("close", resolve));
      return session;
    };
    const first = await call();
    expect((await call()) === first).toBe(true);
    // The server drops the connection: the next request opens another, whose window is widened as the first's was.
    const closed = new Promise((resolve) => first.once("close", resolve));
    (sessions[0] as ServerHttp2Session).destroy();
    await closed;
    const second = await call();
    expect(second === first).toBe(false);
    expect(sessions).toHaveLength(2);
    expect((sessions[1] as ServerHttp2Session).state.remoteWindowSize).toBeGreaterThanOrEqual(CONNECTION_WINDOW_BYTES);
    manager.abort();
  });
});
