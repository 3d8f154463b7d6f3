import { randomUUID } from "node:crypto";
import { Errors, farmError } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { LogcatFeed, type LogcatViewer } from "./logcat-feed.js";

/** How long the agent has to start a phone's logcat. */
export const LOGCAT_START_TIMEOUT_MS = 15_000;
/** A feed nobody reads is kept this long, so a reloaded page does not restart the phone's logcat. */
const LINGER_MS = 3_000;

export interface RunningLogcat {
  physicalId: string;
  feed: LogcatFeed;
  streamId: string;
  /** Ends the agent's ServeLogcat call (and so its logcat). */
  stop: AbortController;
  joined: boolean;
  linger?: NodeJS.Timeout;
}

/**
 * The live logcats being followed, one per phone by physical id (however
 * many viewers it has), and by stream id until the agent joins.
 */
export class LogcatFeeds {
  private readonly byPhone = new Map<string, RunningLogcat>();
  private readonly byStream = new Map<string, RunningLogcat>();
  /** Lines dropped for viewers that have left. */
  private pastDropped = 0;
  /** Feeds started since this coordinator started (one per phone while any viewer reads it). */
  started = 0;

  constructor(private readonly log: Logger) {}

  /** The phone's running feed, or a new one started on its agent. */
  async feedFor(physicalId: string, start: (streamId: string) => Promise<void>): Promise<RunningLogcat> {
    const running = this.byPhone.get(physicalId);
    if (running) {
      clearTimeout(running.linger);
      running.linger = undefined;
      return running;
    }
    const r: RunningLogcat = { physicalId, feed: new LogcatFeed(), streamId: randomUUID(), stop: new AbortController(), joined: false };
    this.byPhone.set(physicalId, r);
    this.byStream.set(r.streamId, r);
    this.started++;
    const timer = setTimeout(() => {
      if (!r.joined) this.end(physicalId, r, farmError(Errors.COMMAND_TIMEOUT, "the agent did not start the live logcat in time"));
    }, LOGCAT_START_TIMEOUT_MS);
    timer.unref();
    r.stop.signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
    try {
      await start(r.streamId);
    } catch (err) {
      this.end(physicalId, r, err instanceof Error ? err : new Error(String(err)));
      throw err;
    }
    return r;
  }

  /** The agent's ServeLogcat call for a stream id; each joins once. */
  claim(streamId: string): RunningLogcat | undefined {
    const r = this.byStream.get(streamId);
    if (!r || r.joined) return undefined;
    r.joined = true;
    this.byStream.delete(streamId);
    return r;
  }

  /** A viewer left: the last one lets the feed go after a short while. */
  left(physicalId: string, r: RunningLogcat, viewer: LogcatViewer): void {
    this.pastDropped += viewer.droppedTotal;
    if (r.feed.leave(viewer) > 0 || this.byPhone.get(physicalId) !== r) return;
    r.linger = setTimeout(() => {
      if (r.feed.viewerCount === 0) this.end(physicalId, r, null);
    }, LINGER_MS);
    r.linger.unref();
  }

  /** Ends a feed: its viewers' streams and the agent's call. */
  end(physicalId: string, r: RunningLogcat, err: Error | null): void {
    if (this.byPhone.get(physicalId) === r) this.byPhone.delete(physicalId);
    this.byStream.delete(r.streamId);
    clearTimeout(r.linger);
    r.feed.end(err);
    r.stop.abort();
    if (err) this.log.info("live logcat ended", { physicalId, error: err.message });
  }

  /** For metrics: phones followed now, their viewers, lines waiting for those, lines dropped so far. */
  stats(): { phones: number; viewers: number; queuedLines: number; dropped: number } {
    const all = { phones: this.byPhone.size, viewers: 0, queuedLines: 0, dropped: this.pastDropped };
    for (const r of this.byPhone.values()) {
      const s = r.feed.stats();
      all.viewers += s.viewers;
      all.queuedLines += s.queuedLines;
      all.dropped += s.dropped;
    }
    return all;
  }

  endAll(): void {
    for (const [physicalId, r] of [...this.byPhone]) this.end(physicalId, r, farmError(Errors.COORDINATOR_UNAVAILABLE, "the coordinator is stopping"));
  }
}
