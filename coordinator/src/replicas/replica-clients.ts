import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { noDelaySessionOptions } from "@farm/shared/no-delay";
import { ReplicaService } from "@farm/shared/gen/farm/v1/replica_service_pb";
import type { Membership } from "./membership.js";

/**
 * Clients for the other replicas' ReplicaService, one HTTP/2 connection per
 * replica, each call carrying this replica's credential. A replica that is
 * no longer live has no client.
 */
export class ReplicaClients {
  private readonly clients = new Map<string, { url: string; client: Client<typeof ReplicaService> }>();

  constructor(private readonly membership: Membership) {
    membership.events.on("gone", (id) => this.clients.delete(id));
  }

  /** The client for a live replica, or undefined. */
  client(replicaId: string): Client<typeof ReplicaService> | undefined {
    const url = this.membership.urlOf(replicaId);
    if (!url) return undefined;
    const cached = this.clients.get(replicaId);
    if (cached?.url === url) return cached.client;
    const credential: Interceptor = (next) => (req) => {
      req.header.set("authorization", `Bearer ${this.membership.credential()}`);
      return next(req);
    };
    // Nagle off: a forwarded call is small and latency-bound (see no-delay.ts).
    const client = createClient(ReplicaService, createGrpcTransport({ baseUrl: url, interceptors: [credential], nodeOptions: noDelaySessionOptions() }));
    this.clients.set(replicaId, { url, client });
    return client;
  }
}
