/**
 * The floors of coordinator-load's figures: a server on HTTP/2 that serves
 * AgentService.Attach and does nothing else (no auth, no registry, no
 * store): it accepts the hello and reads every message to the end. The same
 * simulated agents against it cost what the RPC framework, HTTP/2 and Node
 * cost for that many streams, without farm's own work.
 *
 *   --kind connect-node (default): connect-node's router, as the coordinator
 *     would serve the streams without its own framing;
 *   --kind bare: `node:http2` alone: the answer headers and one framed
 *     helloAccepted as each stream opens, then every DATA frame read and
 *     dropped (no parsing): what Node itself costs for the sessions.
 *
 *   node test/dist/bench/attach-floor-server.js [--kind bare]   # prints {"ok":true,"url":...}, runs until stdin closes
 */
import { createServer, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import { create, toBinary } from "@bufbuild/protobuf";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { AgentService, AttachResponseSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { PROTOCOL_VERSION } from "@farm/shared/version";

const { values } = parseArgs({ options: { kind: { type: "string", default: "connect-node" } } });
if (values.kind !== "connect-node" && values.kind !== "bare") throw new Error(`--kind is connect-node or bare, got ${values.kind}`);

const hello = () => create(AttachResponseSchema, { kind: { case: "helloAccepted", value: { protocolVersion: PROTOCOL_VERSION, coordinatorVersion: "floor" } } });

function connectNodeServer() {
  const handler = connectNodeAdapter({
    routes(router) {
      router.service(AgentService, {
        async *attach(requests) {
          for await (const msg of requests) {
            if (msg.kind.case === "hello") yield hello();
          }
        },
      });
    },
  });
  return createServer(handler);
}

function bareServer() {
  const body = toBinary(AttachResponseSchema, hello());
  const framed = Buffer.alloc(5 + body.length);
  framed.writeUInt32BE(body.length, 1);
  framed.set(body, 5);
  const server = createServer();
  server.on("stream", (stream: ServerHttp2Stream) => {
    stream.respond({ ":status": 200, "content-type": "application/grpc+proto" });
    stream.write(framed);
    stream.on("data", () => {});
    stream.on("end", () => stream.end(undefined, () => {}));
    stream.on("error", () => {});
  });
  // No compatibility-API request handler: the 'stream' event is the whole server.
  return server;
}

const server = values.kind === "bare" ? bareServer() : connectNodeServer();
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
console.log(JSON.stringify({ ok: true, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
process.stdin.resume();
process.stdin.once("end", () => process.exit(0));
