/**
 * The floor of coordinator-load's figures: a bare connect-node server on
 * HTTP/2 that serves AgentService.Attach and does nothing else (no auth, no
 * registry, no store): it accepts the hello and reads every message to the
 * end. The same simulated agents against it cost what the RPC framework,
 * HTTP/2 and Node cost for that many streams, without farm's own work.
 *
 *   node test/dist/bench/attach-floor-server.js   # prints {"ok":true,"url":...}, runs until stdin closes
 */
import { createServer } from "node:http2";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { AgentService, AttachResponseSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { PROTOCOL_VERSION } from "@farm/shared/version";

const handler = connectNodeAdapter({
  routes(router) {
    router.service(AgentService, {
      async *attach(requests) {
        for await (const msg of requests) {
          if (msg.kind.case === "hello") yield create(AttachResponseSchema, { kind: { case: "helloAccepted", value: { protocolVersion: PROTOCOL_VERSION, coordinatorVersion: "floor" } } });
        }
      },
    });
  },
});
const server = createServer(handler);
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
console.log(JSON.stringify({ ok: true, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
process.stdin.resume();
process.stdin.once("end", () => process.exit(0));
