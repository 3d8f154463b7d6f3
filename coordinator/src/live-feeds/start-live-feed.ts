import type { AgentCaller } from "../routing/agent-session.js";
import { RemoteAgentSession } from "../replicas/remote-agent-session.js";
import { type FeedRelayCall, relayFeed } from "./feed-relay.js";
import type { LiveFeeds, SharedFeed } from "./live-feeds.js";

/** Where a watched phone is: its serial and physical id, and the agent holding it (here, or through another replica). */
export interface FeedRoute {
  agentId: string;
  serial: string;
  physicalId: string;
  session: AgentCaller;
}

/** How one kind of feed is started: relayed over a ReplicaService call, or by telling the agent (AgentControlService). */
export interface FeedStart<F, Res> {
  relay: FeedRelayCall<F, Res>;
  onAgent(session: AgentCaller, req: { target: { serial: string; agent: string }; streamId: string }, principal: { tokenName: string; admin: boolean }, deadlineMs: number): Promise<unknown>;
  timeoutMs: number;
}

/**
 * What starts a phone's feed on this replica (its first viewer): on the
 * agent when its stream is here, else relayed once per phone from the
 * replica holding it.
 */
export function liveFeedStarter<F extends SharedFeed<V>, V, Res>(
  feeds: LiveFeeds<F, V>,
  r: FeedRoute,
  principal: { tokenName: string; admin: boolean },
  leaseId: string,
  how: FeedStart<F, Res>,
): (streamId: string) => Promise<void> {
  const session = r.session;
  return async (streamId) => {
    if (session instanceof RemoteAgentSession) return relayFeed(feeds, session, streamId, { serial: r.serial, physicalId: r.physicalId, leaseId, principal }, how.relay);
    await how.onAgent(session, { target: { serial: r.serial, agent: r.agentId }, streamId }, principal, Date.now() + how.timeoutMs);
  };
}
