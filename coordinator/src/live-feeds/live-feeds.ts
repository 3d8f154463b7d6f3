import { randomUUID } from "node:crypto";
import { Errors, farmError } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";

/** What a phone's shared feed offers its registry: viewers join and leave, and it ends once. */
export interface SharedFeed<V> {
  join(viewer: V): void;
  /** Returns how many viewers are left. */
  leave(viewer: V): number;
  readonly viewerCount: number;
  end(err: Error | null): void;
}

/** One phone's feed as this replica streams it: from its agent, or relayed from the replica holding the agent. */
export interface RunningFeed<F> {
  physicalId: string;
  feed: F;
  streamId: string;
  /** Ends the agent's serving call (and so what runs on the phone for it). */
  stop: AbortController;
  joined: boolean;
  linger?: NodeJS.Timeout;
}

export interface LiveFeedsOptions<F> {
  /** As errors and logs name it: "live screen", "live logcat". */
  what: string;
  newFeed: () => F;
  /** How long the agent has to join a feed it was told to start. */
  startTimeoutMs: number;
  /** A feed nobody watches is kept this long, so a reloaded page does not restart it on the phone. */
  lingerMs: number;
}

/**
 * The live feeds being streamed, one per phone by physical id (however many
 * viewers it has), and by stream id until the agent joins. The live logcat
 * is one of these; the live screen (ScreenFeeds) still has its own copy.
 */
export class LiveFeeds<F extends SharedFeed<V>, V> {
  private readonly byPhone = new Map<string, RunningFeed<F>>();
  private readonly byStream = new Map<string, RunningFeed<F>>();
  /** Feeds started since this coordinator started (one per phone while any viewer reads it). */
  started = 0;

  constructor(
    protected readonly log: Logger,
    private readonly opts: LiveFeedsOptions<F>,
  ) {}

  /** The phone's running feed, or a new one started by `start` (on its agent, or through the replica holding it). */
  async feedFor(physicalId: string, start: (streamId: string) => Promise<void>): Promise<RunningFeed<F>> {
    const running = this.byPhone.get(physicalId);
    if (running) {
      clearTimeout(running.linger);
      running.linger = undefined;
      return running;
    }
    const r: RunningFeed<F> = { physicalId, feed: this.opts.newFeed(), streamId: randomUUID(), stop: new AbortController(), joined: false };
    this.byPhone.set(physicalId, r);
    this.byStream.set(r.streamId, r);
    this.started++;
    const timer = setTimeout(() => {
      if (!r.joined) this.end(physicalId, r, farmError(Errors.COMMAND_TIMEOUT, `the agent did not start the ${this.opts.what} in time`));
    }, this.opts.startTimeoutMs);
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

  /** The agent's serving call (or the relay) for a stream id; each joins once. */
  claim(streamId: string): RunningFeed<F> | undefined {
    const r = this.byStream.get(streamId);
    if (!r || r.joined) return undefined;
    r.joined = true;
    this.byStream.delete(streamId);
    return r;
  }

  /** A viewer left: the last one lets the feed go after a short while. */
  left(physicalId: string, r: RunningFeed<F>, viewer: V): void {
    this.viewerLeft(viewer);
    if (r.feed.leave(viewer) > 0 || this.byPhone.get(physicalId) !== r) return;
    r.linger = setTimeout(() => {
      if (r.feed.viewerCount === 0) this.end(physicalId, r, null);
    }, this.opts.lingerMs);
    r.linger.unref();
  }

  /** Ends a feed: its viewers' streams and the agent's call. */
  end(physicalId: string, r: RunningFeed<F>, err: Error | null): void {
    if (this.byPhone.get(physicalId) === r) this.byPhone.delete(physicalId);
    this.byStream.delete(r.streamId);
    clearTimeout(r.linger);
    r.feed.end(err);
    r.stop.abort();
    if (err) this.log.info(`${this.opts.what} ended`, { physicalId, error: err.message });
  }

  /** As errors and logs name these feeds: "live screen", "live logcat". */
  get what(): string {
    return this.opts.what;
  }

  endAll(): void {
    for (const [physicalId, r] of [...this.byPhone]) this.end(physicalId, r, farmError(Errors.COORDINATOR_UNAVAILABLE, "the coordinator is stopping"));
  }

  /** A viewer left: what it counted (drops, resyncs) is kept by the subclass, for metrics. */
  protected viewerLeft(_viewer: V): void {}

  /** The feeds running now, for metrics. */
  protected runningFeeds(): IterableIterator<RunningFeed<F>> {
    return this.byPhone.values();
  }

  protected get phones(): number {
    return this.byPhone.size;
  }
}
