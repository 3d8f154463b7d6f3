import { setMaxListeners } from "node:events";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { grpcUnary } from "@farm/shared/grpc-unary/grpc-unary-transport";
import { noDelaySessionOptions } from "@farm/shared/no-delay";
import { wideWindowSessions } from "@farm/shared/http2-windows";
import { ReplicaService } from "@farm/shared/gen/farm/v1/replica_service_pb";
import type { Membership } from "./membership.js";
import { ReplicaLink } from "./replica-link.js";

/**
 * Clients for the other replicas' ReplicaService, one kept HTTP/2
 * connection per replica, each call carrying this replica's credential. A
 * replica that is no longer live has no client. Unary calls (a forwarded
 * agent call) are framed by hand on that connection (shared/grpc-unary):
 * connect-node's per-call machinery was most of a forwarded call's added
 * cost (test/bench/replicas.ts); streams (relayed shells, screens, adb
 * streams) use connect-node's transport on the same connection.
 */
export class ReplicaClients {
  private readonly clients = new Map<string, { url: string; client: Client<typeof ReplicaService> }>();
  private readonly gone = new Map<string, AbortController>();
  private readonly links = new Map<string, { client: Client<typeof ReplicaService>; link: ReplicaLink }>();

  /** `links: false`: forwarded calls go by unary CallAgent only (the build before links; for comparing the two). */
  constructor(
    private readonly membership: Membership,
    private readonly opts: { links?: boolean } = {},
  ) {
    membership.events.on("gone", (id) => {
      this.clients.delete(id);
      this.links.get(id)?.link.close();
      this.links.delete(id);
      this.gone.get(id)?.abort();
      this.gone.delete(id);
    });
  }

  /**
   * Aborts when the replica is gone (it left, or missed its heartbeats): a
   * long-lived stream to it ends then, even if its connection never closed.
   */
  goneSignal(replicaId: string): AbortSignal {
    if (!this.membership.isLive(replicaId)) return AbortSignal.abort();
    let gone = this.gone.get(replicaId);
    if (!gone) {
      gone = new AbortController();
      // One listener per open session to that replica: many is normal.
      setMaxListeners(0, gone.signal);
      this.gone.set(replicaId, gone);
    }
    return gone.signal;
  }

  /**
   * The link (ReplicaService.Link) to a live replica for forwarded calls,
   * opened at first use and again after it ended; undefined when the
   * replica is gone, does not know Link, or links are off.
   */
  link(replicaId: string): ReplicaLink | undefined {
    if (this.opts.links === false) return undefined;
    const client = this.client(replicaId);
    if (!client) return undefined;
    const kept = this.links.get(replicaId);
    if (kept?.client === client) {
      if (kept.link.unsupported) return undefined;
      if (!kept.link.closed) return kept.link;
    }
    const link = new ReplicaLink(client, this.goneSignal(replicaId));
    this.links.set(replicaId, { client, link });
    return link;
  }

  /** Ends every link (this replica is leaving). */
  closeLinks(): void {
    for (const { link } of this.links.values()) link.close();
    this.links.clear();
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
    // Nagle off: a forwarded call is small and latency-bound (see no-delay.ts). Pings while
    // streams are open: a shell relayed for hours notices a peer that vanished from the network.
    const sessionManager = wideWindowSessions(url, { pingIntervalMs: 15_000, pingTimeoutMs: 10_000 }, noDelaySessionOptions());
    const grpc = createGrpcTransport({ baseUrl: url, interceptors: [credential], sessionManager });
    const client = createClient(ReplicaService, {
      unary: grpcUnary({ baseUrl: url, sessions: sessionManager, interceptors: [credential] }),
      stream: grpc.stream.bind(grpc),
    });
    this.clients.set(replicaId, { url, client });
    return client;
  }
}
