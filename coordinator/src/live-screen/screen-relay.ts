import { linkedAbort } from "../replicas/linked-abort.js";
import type { RemoteAgentSession } from "../replicas/remote-agent-session.js";
import type { Running, ScreenFeeds } from "./live-screen-service.js";

const notDispatched = { dispatched: false, ambiguous: false };

/**
 * Feeds `running` (this replica's one feed of the phone) from the replica
 * holding the phone's agent (ReplicaService.RelayScreen): once per phone,
 * however many watch it here. That replica is one more viewer of its own
 * feed, so a slow link resynchronizes at a key frame there and HTTP/2 flow
 * control bounds what is in flight; nothing queues without bound. The
 * feed's stop (its last viewer gone) cancels the relay; losing that replica
 * ends the feed, and so every viewer here, with AGENT_OFFLINE.
 */
export function relayScreen(
  feeds: ScreenFeeds,
  session: RemoteAgentSession,
  running: Running,
  opts: { serial: string; physicalId: string; leaseId: string; principal: { tokenName: string; admin: boolean } },
): Promise<void> {
  const { client, gone } = session.link();
  const stop = running.stop.signal;
  // The agent's replica starts the phone's stream and times it out itself: nothing for the agent to join here.
  feeds.claim(running.streamId);
  const linked = linkedAbort(stop, gone);
  const responses = client.relayScreen(
    {
      agentId: session.agentId,
      target: { serial: opts.serial, agent: session.agentId },
      physicalId: opts.physicalId,
      leaseId: opts.leaseId,
      requestedBy: opts.principal.tokenName,
      requestedByAdmin: opts.principal.admin,
    },
    { signal: linked.signal },
  );
  void (async () => {
    try {
      for await (const res of responses) if (res.event) running.feed.publish(res.event);
      // That replica ended its feed without an error (its phone's stream ended normally).
      if (!stop.aborted) feeds.end(opts.physicalId, running, null);
    } catch (err) {
      if (!stop.aborted) feeds.end(opts.physicalId, running, session.hopError(gone.aborted ? new Error("it stopped heartbeating") : err, "streaming the live screen", notDispatched));
    } finally {
      linked.dispose();
    }
  })();
  return Promise.resolve();
}
