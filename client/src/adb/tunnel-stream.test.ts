import { once } from "node:events";
import type { Duplex } from "node:stream";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { AdbTunnelService, OpenAdbStreamResponseSchema, type OpenAdbStreamResponse } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { afterEach, describe, expect, it } from "vitest";
import { listenH2 } from "./testing/listen-h2.js";
import { openTunnelStream, tunnelStreamCalls } from "./tunnel-stream.js";

// The CLI's end of one adb stream against a coordinator over real gRPC
// (HTTP/2) whose OpenAdbStream says what each test needs: how the phone's
// end reaches the CLI.

interface Served {
  url: string;
  /** Resolves when the stream's call ends on the server (finished or cancelled). */
  callEnded: Promise<void>;
  stop(): Promise<void>;
}

/** A coordinator that opens every stream, sends `messages` and then holds the call open until `release` (or the caller leaves). */
async function serve(messages: OpenAdbStreamResponse[], release: Promise<void>): Promise<Served> {
  let ended!: () => void;
  const callEnded = new Promise<void>((resolve) => (ended = resolve));
  const handler = connectNodeAdapter({
    routes(router) {
      router.service(AdbTunnelService, {
        async *openAdbStream(requests, ctx) {
          const it = requests[Symbol.asyncIterator]();
          const first = await it.next();
          if (first.done) return;
          try {
            yield create(OpenAdbStreamResponseSchema, { kind: { case: "opened", value: true } });
            for (const m of messages) yield m;
            await Promise.race([release, once(ctx.signal, "abort")]);
          } finally {
            ended();
          }
        },
      });
    },
  });
  const { url, stop } = await listenH2(handler);
  return {
    url,
    callEnded,
    stop,
  };
}

/** Everything the stream gives until it ends. */
async function readAll(duplex: Duplex): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of duplex as AsyncIterable<Buffer>) parts.push(chunk);
  return Buffer.concat(parts).toString();
}

const data = (text: string) => create(OpenAdbStreamResponseSchema, { kind: { case: "data", value: Buffer.from(text) } });
const end = create(OpenAdbStreamResponseSchema, { kind: { case: "end", value: true } });

let served: Served | undefined;
let release = () => {};

afterEach(async () => {
  release();
  await served?.stop();
  served = undefined;
});

describe("a tunnel's adb stream: the phone's end", () => {
  it("ends when the coordinator says the phone's side ended, without waiting for the call's trailers", async () => {
    // The call stays open after `end` until the test ends: only the message can end the stream.
    served = await serve([data("hi\n"), end], new Promise((resolve) => (release = resolve)));
    const calls = tunnelStreamCalls(createClient(AdbTunnelService, createGrpcTransport({ baseUrl: served.url })));
    const duplex = await openTunnelStream(calls, "tunnel-1", "shell:echo hi");
    // No spare after this stream: one opening while the server's session is destroyed made Node 20 spin in destroy().
    calls.close();
    expect(await readAll(duplex)).toBe("hi\n");
    duplex.destroy();
    // The CLI leaves the call then; the server's handler ends with it.
    await served.callEnded;
  });

  it("ends at the call's end from a coordinator that does not say `end` (an older one)", async () => {
    served = await serve([data("hi\n")], Promise.resolve());
    const calls = tunnelStreamCalls(createClient(AdbTunnelService, createGrpcTransport({ baseUrl: served.url })));
    const duplex = await openTunnelStream(calls, "tunnel-1", "shell:echo hi");
    // No spare after this stream: one opening while the server's session is destroyed made Node 20 spin in destroy().
    calls.close();
    expect(await readAll(duplex)).toBe("hi\n");
    await served.callEnded;
  });
});
