import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { noDelaySessionOptions } from "@farm/shared/no-delay";

/** One HTTP/2 connection to the coordinator for the control stream and uploads. */
export function coordinatorTransport(url: string, token: string): Transport {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  return createGrpcTransport({
    baseUrl: url,
    interceptors: [auth],
    // HTTP/2 pings notice a dead coordinator even when no heartbeat is due.
    pingIntervalMs: 10_000,
    pingTimeoutMs: 10_000,
    nodeOptions: noDelaySessionOptions(),
  });
}
