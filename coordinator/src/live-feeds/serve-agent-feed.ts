import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import type { LiveFeeds, SharedFeed } from "./live-feeds.js";

/** How the agent's serving call of one kind of feed reads. */
export interface AgentFeedCall<F, M> {
  /** The stream id the first message names, if it is one. */
  streamIdOf(m: M): string | undefined;
  /** Adds one message to the feed; throws on one it must not take (the feed ends AGENT_OFFLINE). */
  publish(feed: F, m: M): void;
  /** Why the feed ended: the agent's stream ended normally ("the phone's screen stream ended"), or was lost. */
  ended: string;
  lost: string;
}

/**
 * The agent's side of a feed: its call joins the feed it was told to start
 * and publishes what it sends. Nothing goes to the agent: the call stays
 * open until the feed stops (or the agent leaves).
 */
export async function serveAgentFeed<F extends SharedFeed<V>, V, M>(feeds: LiveFeeds<F, V>, requests: AsyncIterable<M>, signal: AbortSignal, call: AgentFeedCall<F, M>): Promise<void> {
  const it = requests[Symbol.asyncIterator]();
  const first = await it.next();
  const streamId = first.done ? undefined : call.streamIdOf(first.value);
  if (streamId === undefined) throw invalidArgument("stream_id", "the first message must be the stream id");
  const running = feeds.claim(streamId);
  if (!running) throw farmError(Errors.NOT_FOUND, `no such ${feeds.what}`, "stream_id");
  const stopped = running.stop.signal;
  void (async () => {
    try {
      for (;;) {
        const m = await it.next();
        if (m.done || stopped.aborted) break;
        call.publish(running.feed, m.value);
      }
      if (!stopped.aborted) feeds.end(running.physicalId, running, farmError(Errors.DEVICE_OFFLINE, call.ended));
    } catch {
      feeds.end(running.physicalId, running, farmError(Errors.AGENT_OFFLINE, call.lost));
    }
  })();
  await new Promise<void>((resolve) => {
    if (stopped.aborted || signal.aborted) return resolve();
    stopped.addEventListener("abort", () => resolve(), { once: true });
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
  if (!stopped.aborted) feeds.end(running.physicalId, running, farmError(Errors.AGENT_OFFLINE, call.lost));
}
