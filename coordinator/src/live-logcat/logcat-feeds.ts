import type { Logger } from "@farm/shared/log";
import { LiveFeeds, type RunningFeed } from "../live-feeds/live-feeds.js";
import { LogcatFeed, type LogcatViewer } from "./logcat-feed.js";

/** How long the agent has to start a phone's logcat. */
export const LOGCAT_START_TIMEOUT_MS = 15_000;
/** A feed nobody reads is kept this long, so a reloaded page does not restart the phone's logcat. */
const LINGER_MS = 3_000;

export type RunningLogcat = RunningFeed<LogcatFeed>;

/**
 * The live logcats being followed, one per phone by physical id (however
 * many viewers it has), and by stream id until the agent joins.
 */
export class LogcatFeeds extends LiveFeeds<LogcatFeed, LogcatViewer> {
  /** Lines dropped for viewers that have left. */
  private pastDropped = 0;

  constructor(log: Logger) {
    super(log, { what: "live logcat", newFeed: () => new LogcatFeed(), startTimeoutMs: LOGCAT_START_TIMEOUT_MS, lingerMs: LINGER_MS });
  }

  protected override viewerLeft(viewer: LogcatViewer): void {
    this.pastDropped += viewer.droppedTotal;
  }

  /** For metrics: phones followed now, their viewers, lines waiting for those, lines dropped so far. */
  stats(): { phones: number; viewers: number; queuedLines: number; dropped: number } {
    const all = { phones: this.phones, viewers: 0, queuedLines: 0, dropped: this.pastDropped };
    for (const r of this.runningFeeds()) {
      const s = r.feed.stats();
      all.viewers += s.viewers;
      all.queuedLines += s.queuedLines;
      all.dropped += s.dropped;
    }
    return all;
  }
}
