import { connect, type ClientHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { CONNECTION_WINDOW_BYTES, STREAM_WINDOW_BYTES } from "@farm/shared/http2-windows";
import { createDualServer, type DualServer } from "./http-server.js";

let server: DualServer | undefined;
let client: ClientHttp2Session | undefined;
afterEach(async () => {
  client?.destroy();
  await server?.close();
  server = client = undefined;
});

describe("coordinator HTTP/2 listener", () => {
  it("lets a client send a wide window of bytes before it waits, per stream and per connection", async () => {
    server = createDualServer((_req, res) => res.end());
    await new Promise<void>((resolve) => server?.server.listen(0, "127.0.0.1", resolve));
    const { port } = server.server.address() as AddressInfo;
    const session = connect(`http://127.0.0.1:${port}`);
    client = session;
    await new Promise<void>((resolve) => session.once("remoteSettings", () => resolve()));
    // The server's settings give each stream its window; its WINDOW_UPDATE widens the connection's.
    expect(session.remoteSettings.initialWindowSize).toBe(STREAM_WINDOW_BYTES);
    const req = session.request({ ":path": "/healthz" });
    req.resume();
    await new Promise((resolve) => req.once("close", resolve));
    expect(session.state.remoteWindowSize).toBeGreaterThanOrEqual(CONNECTION_WINDOW_BYTES);
  });
});
