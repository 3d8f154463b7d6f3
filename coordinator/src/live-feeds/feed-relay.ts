import type { Client } from "@connectrpc/connect";
import type { ReplicaService } from "@farm/shared/gen/farm/v1/replica_service_pb";
import { linkedAbort } from "../replicas/linked-abort.js";
import type { RemoteAgentSession } from "../replicas/remote-agent-session.js";
import type { LiveFeeds, SharedFeed } from "./live-feeds.js";

const notDispatched = { dispatched: false, ambiguous: false };

/** What a relay asks the replica holding the agent for (RelayScreenRequest, RelayLogcatRequest). */
export interface RelayFeedRequest {
  agentId: string;
  target: { serial: string; agent: string };
  physicalId: string;
  leaseId: string;
  requestedBy: string;
  requestedByAdmin: boolean;
}

export interface RelayFeedOptions {
  serial: string;
  physicalId: string;
  leaseId: string;
  principal: { tokenName: string; admin: boolean };
}

/** The one ReplicaService call a feed is relayed over, and what each of its answers adds to the feed. */
export interface FeedRelayCall<F, Res> {
  open(client: Client<typeof ReplicaService>, req: RelayFeedRequest, signal: AbortSignal): AsyncIterable<Res>;
  apply(feed: F, res: Res): void;
}

/**
 * Feeds this replica's one feed of a phone (stream `streamId`) from the
 * replica holding the phone's agent, once per phone however many watch it
 * here. That replica's relay is one more viewer of its own feed (bounded
 * there), and HTTP/2 flow control bounds what is in flight: nothing queues
 * without bound. The feed's stop (its last viewer gone) cancels the relay;
 * losing that replica ends the feed, and so every viewer here, with
 * AGENT_OFFLINE.
 */
export function relayFeed<F extends SharedFeed<V>, V, Res>(
  feeds: LiveFeeds<F, V>,
  session: RemoteAgentSession,
  streamId: string,
  opts: RelayFeedOptions,
  call: FeedRelayCall<F, Res>,
): Promise<void> {
  // The agent's replica starts the phone's stream and times it out itself: nothing for an agent to join here.
  const running = feeds.claim(streamId);
  if (!running) return Promise.resolve();
  const { client, gone } = session.link();
  const stop = running.stop.signal;
  const linked = linkedAbort(stop, gone);
  const responses = call.open(
    client,
    {
      agentId: session.agentId,
      target: { serial: opts.serial, agent: session.agentId },
      physicalId: opts.physicalId,
      leaseId: opts.leaseId,
      requestedBy: opts.principal.tokenName,
      requestedByAdmin: opts.principal.admin,
    },
    linked.signal,
  );
  void (async () => {
    try {
      for await (const res of responses) call.apply(running.feed, res);
      // That replica ended its feed without an error (the phone's stream ended normally).
      if (!stop.aborted) feeds.end(opts.physicalId, running, null);
    } catch (err) {
      if (!stop.aborted) feeds.end(opts.physicalId, running, session.hopError(gone.aborted ? new Error("it stopped heartbeating") : err, `streaming the ${feeds.what}`, notDispatched));
    } finally {
      linked.dispose();
    }
  })();
  return Promise.resolve();
}
