import { linkedAbort } from "../replicas/linked-abort.js";
import type { RemoteAgentSession } from "../replicas/remote-agent-session.js";
import type { LogcatFeeds } from "./logcat-feeds.js";

const notDispatched = { dispatched: false, ambiguous: false };

/**
 * Feeds this replica's one logcat feed of a phone (stream `streamId`) from
 * the replica holding the phone's agent (ReplicaService.RelayLogcat), once
 * per phone however many read it here. That replica's relay is one more
 * reader of its own feed: bounded there (lines it misses are counted and
 * passed on as dropped), and HTTP/2 flow control bounds what is in flight.
 * The feed's stop (its last reader gone) cancels the relay; losing that
 * replica ends the feed, and so every reader here, with AGENT_OFFLINE.
 */
export function relayLogcat(
  feeds: LogcatFeeds,
  session: RemoteAgentSession,
  streamId: string,
  opts: { serial: string; physicalId: string; leaseId: string; principal: { tokenName: string; admin: boolean } },
): Promise<void> {
  // The agent's replica starts the phone's logcat and times it out itself: nothing for an agent to join here.
  const running = feeds.claim(streamId);
  if (!running) return Promise.resolve();
  const { client, gone } = session.link();
  const stop = running.stop.signal;
  const linked = linkedAbort(stop, gone);
  const responses = client.relayLogcat(
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
      for await (const res of responses) {
        running.feed.missed(res.dropped);
        running.feed.publish(res.lines);
      }
      // That replica ended its feed without an error (the phone's logcat ended normally).
      if (!stop.aborted) feeds.end(opts.physicalId, running, null);
    } catch (err) {
      if (!stop.aborted) feeds.end(opts.physicalId, running, session.hopError(gone.aborted ? new Error("it stopped heartbeating") : err, "streaming the live logcat", notDispatched));
    } finally {
      linked.dispose();
    }
  })();
  return Promise.resolve();
}
