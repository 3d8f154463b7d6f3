import type { LogLine } from "@farm/shared/gen/farm/v1/logcat_service_pb";

/** Lines a feed keeps for viewers that join: what a newly opened Logs tab shows at once. */
export const FEED_BACKLOG_LINES = 500;
/** Lines one viewer may have waiting; past this its oldest are dropped (and counted), so a slow viewer holds bounded memory and never slows the others. */
export const VIEWER_MAX_LINES = 2_000;
/** Lines sent to a viewer in one message at most. */
export const VIEWER_BATCH_LINES = 500;

/** What a viewer is sent: lines, and how many it missed before them. */
export interface LogBatch {
  lines: LogLine[];
  dropped: number;
}

/**
 * One phone's live log as the coordinator holds it: the newest lines (a
 * ring of FEED_BACKLOG_LINES) and the viewers, each with a bounded queue.
 * Lines are shared, never copied per viewer.
 */
export class LogcatFeed {
  private ring: LogLine[] = [];
  private readonly viewers = new Set<LogcatViewer>();
  private endedWith: Error | null | undefined;
  /** Lines read off the phone so far. */
  published = 0;

  publish(lines: readonly LogLine[]): void {
    if (this.endedWith !== undefined || lines.length === 0) return;
    this.published += lines.length;
    this.ring.push(...lines);
    if (this.ring.length > FEED_BACKLOG_LINES) this.ring = this.ring.slice(this.ring.length - FEED_BACKLOG_LINES);
    for (const v of this.viewers) v.offer(lines);
  }

  join(viewer: LogcatViewer): void {
    if (this.endedWith !== undefined) return viewer.end(this.endedWith);
    this.viewers.add(viewer);
    viewer.offer(this.ring);
  }

  leave(viewer: LogcatViewer): number {
    this.viewers.delete(viewer);
    return this.viewers.size;
  }

  get viewerCount(): number {
    return this.viewers.size;
  }

  /** Lines waiting for this feed's viewers, and how many they dropped. */
  stats(): { viewers: number; queuedLines: number; dropped: number } {
    let queuedLines = 0;
    let dropped = 0;
    for (const v of this.viewers) {
      queuedLines += v.queuedLines;
      dropped += v.droppedTotal;
    }
    return { viewers: this.viewers.size, queuedLines, dropped };
  }

  /** Lines missed upstream (a relay from another replica fell behind there): every viewer is told with its next lines. */
  missed(count: number): void {
    if (this.endedWith !== undefined || count <= 0) return;
    for (const v of this.viewers) v.missed(count);
  }

  /** The phone's stream ended: every viewer's does, with `err` (or normally). */
  end(err: Error | null): void {
    if (this.endedWith !== undefined) return;
    this.endedWith = err;
    for (const v of this.viewers) v.end(err);
    this.viewers.clear();
  }
}

/** One viewer's queue: consumed as the messages of its WatchLogcat call. */
export class LogcatViewer implements AsyncIterable<LogBatch> {
  private queue: LogLine[] = [];
  private dropped = 0;
  private endedWith: Error | null | undefined;
  private wake: (() => void) | undefined;
  /** Lines this viewer missed in all. */
  droppedTotal = 0;

  offer(lines: readonly LogLine[]): void {
    if (this.endedWith !== undefined || lines.length === 0) return;
    this.queue.push(...lines);
    const over = this.queue.length - VIEWER_MAX_LINES;
    if (over > 0) {
      this.queue.splice(0, over);
      this.dropped += over;
      this.droppedTotal += over;
    }
    this.notify();
  }

  /** Lines lost before they reached this viewer's feed, counted as dropped. */
  missed(count: number): void {
    this.dropped += count;
    this.droppedTotal += count;
  }

  get queuedLines(): number {
    return this.queue.length;
  }

  end(err: Error | null): void {
    if (this.endedWith !== undefined) return;
    this.endedWith = err;
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<LogBatch, void, undefined> {
    for (;;) {
      if (this.queue.length > 0) {
        const lines = this.queue.splice(0, VIEWER_BATCH_LINES);
        const dropped = this.dropped;
        this.dropped = 0;
        yield { lines, dropped };
        continue;
      }
      if (this.endedWith !== undefined) {
        if (this.endedWith) throw this.endedWith;
        return;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}
