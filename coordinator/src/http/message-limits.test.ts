import { createServer, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { AdbTunnelService, OpenAdbStreamResponseSchema } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { ActivityService, ListActivityResponseSchema } from "@farm/shared/gen/farm/v1/activity_service_pb";
import { BlobService, DownloadBlobResponseSchema } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { limitsOf, withMessageLimits } from "./message-limits.js";

let server: Http2Server | undefined;
const sessions = new Set<ServerHttp2Session>();
afterEach(async () => {
  // The client's session stays open (it is reused); close() waits for it otherwise.
  for (const s of sessions) s.destroy();
  sessions.clear();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

describe("message limits", () => {
  it("lets another replica pass on any device call it received: ReplicaService carries a DeviceService request and more", () => {
    const device = limitsOf("farm.v1.DeviceService").messageMaxBytes;
    expect(limitsOf("farm.v1.ReplicaService").messageMaxBytes).toBeGreaterThan(device);
  });

  it("never gzips a phone's adb bytes or a blob's, though the client accepts gzip; other services still compress", async () => {
    const bytes = new Uint8Array(64 * 1024).fill(7);
    const handler = connectNodeAdapter({
      routes: (router) => {
        const limited = withMessageLimits(router);
        limited.service(AdbTunnelService, {
          async *openAdbStream() {
            yield create(OpenAdbStreamResponseSchema, { kind: { case: "data", value: bytes } });
          },
        });
        limited.service(BlobService, {
          uploadBlob: async () => ({ blobId: "" }),
          async *downloadBlob() {
            yield create(DownloadBlobResponseSchema, { part: { kind: { case: "chunk", value: bytes } } });
          },
        });
        limited.service(ActivityService, {
          listActivity: () => create(ListActivityResponseSchema, { nextPageToken: "x".repeat(64 * 1024) }),
        });
      },
    });
    server = createServer(handler);
    server.on("session", (s) => sessions.add(s));
    await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
    const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
    const encodings: Record<string, string | null> = {};
    const tunnels = createClient(AdbTunnelService, transport);
    const got: number[] = [];
    for await (const m of tunnels.openAdbStream((async function* () {})(), { onHeader: (h) => (encodings["adb"] = h.get("grpc-encoding")) })) {
      if (m.kind.case === "data") got.push(m.kind.value.length);
    }
    expect(got).toEqual([bytes.length]);
    await createClient(ActivityService, transport).listActivity({}, { onHeader: (h) => (encodings["activity"] = h.get("grpc-encoding")) });
    for await (const _ of createClient(BlobService, transport).downloadBlob({ blobId: "b" }, { onHeader: (h) => (encodings["blob"] = h.get("grpc-encoding")) })) void _;
    expect(encodings["adb"] ?? "identity").toBe("identity");
    expect(encodings["blob"] ?? "identity").toBe("identity");
    expect(encodings["activity"]).toBe("gzip");
  });
});
