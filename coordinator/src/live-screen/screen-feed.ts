import type { ScreenEvent, ScreenFormat, ScreenFrame } from "@farm/shared/gen/farm/v1/live_screen_service_pb";

/** What one viewer may have waiting before it is resynchronized at a key frame. */
export const VIEWER_MAX_BYTES = 4 * 1024 * 1024;
export const VIEWER_MAX_FRAMES = 120;
/** A viewer this far behind the phone (oldest waiting frame to newest) is resynchronized: a live view shows now, not a backlog. */
export const VIEWER_MAX_LAG_MS = 1_500;
/** Frames kept since the last key frame, for viewers that join or fall behind; past this, they wait for the next key frame. */
export const GOP_MAX_BYTES = 8 * 1024 * 1024;

/** What a viewer is sent: a format, or a frame. */
export type ScreenItem = { case: "format"; value: ScreenFormat } | { case: "frame"; value: ScreenFrame };

/**
 * One phone's live screen as the coordinator holds it: the current format,
 * the frames since the last key frame, and the viewers. Every viewer has a
 * bounded queue; one that falls behind (a slow link) loses what it had
 * waiting and starts again from the last key frame, so memory per viewer is
 * bounded and a slow viewer never slows the others.
 */
export class ScreenFeed {
  private format: ScreenFormat | undefined;
  private gop: ScreenFrame[] = [];
  private gopBytes = 0;
  private readonly viewers = new Set<ScreenViewer>();
  private endedWith: Error | null | undefined;

  /** One event from the phone's stream. */
  publish(event: ScreenEvent): void {
    if (this.endedWith !== undefined) return;
    const k = event.kind;
    if (k.case === "format") {
      this.format = k.value;
      this.gop = [];
      this.gopBytes = 0;
      for (const v of this.viewers) v.restart(k.value);
    } else if (k.case === "frame") {
      if (!this.format) return;
      this.keep(k.value);
      for (const v of this.viewers) v.offer(k.value, this);
    }
  }

  /** Where a viewer can start now: the format and the frames since the last key frame (empty until there is one). */
  snapshot(): ScreenItem[] {
    if (!this.format || this.gop.length === 0) return this.format ? [{ case: "format", value: this.format }] : [];
    return [{ case: "format", value: this.format }, ...this.gop.map((f) => ({ case: "frame" as const, value: f }))];
  }

  join(viewer: ScreenViewer): void {
    if (this.endedWith !== undefined) return viewer.end(this.endedWith);
    this.viewers.add(viewer);
    viewer.resync(this);
  }

  leave(viewer: ScreenViewer): number {
    this.viewers.delete(viewer);
    return this.viewers.size;
  }

  get viewerCount(): number {
    return this.viewers.size;
  }

  /** Bytes waiting for this feed's viewers, and how often they were resynchronized. */
  stats(): { viewers: number; queuedBytes: number; resyncs: number } {
    let queuedBytes = 0;
    let resyncs = 0;
    for (const v of this.viewers) {
      queuedBytes += v.queuedBytes;
      resyncs += v.resyncs;
    }
    return { viewers: this.viewers.size, queuedBytes, resyncs };
  }

  /** The phone's stream ended: every viewer's does, with `err` (or normally). */
  end(err: Error | null): void {
    if (this.endedWith !== undefined) return;
    this.endedWith = err;
    for (const v of this.viewers) v.end(err);
    this.viewers.clear();
  }

  private keep(frame: ScreenFrame): void {
    if (frame.key) {
      this.gop = [frame];
      this.gopBytes = frame.data.length;
      return;
    }
    if (this.gop.length === 0) return;
    if (this.gopBytes + frame.data.length > GOP_MAX_BYTES) {
      // Too long since a key frame to replay: late viewers wait for the next one.
      this.gop = [];
      this.gopBytes = 0;
      return;
    }
    this.gop.push(frame);
    this.gopBytes += frame.data.length;
  }
}

/** One viewer's queue: consumed as the events of its WatchScreen call. */
export class ScreenViewer implements AsyncIterable<ScreenItem> {
  private items: ScreenItem[] = [];
  private bytes = 0;
  /** Deltas are dropped until a key frame: the viewer has nothing to apply them to. */
  private needKey = true;
  private endedWith: Error | null | undefined;
  private wake: (() => void) | undefined;
  /** How often this viewer fell behind and was sent back to a key frame. */
  resyncs = 0;

  /** `keyOnly`: a thumbnail, sent key frames only (each decodes on its own), so it costs a fraction of a full view. */
  constructor(readonly keyOnly = false) {}

  offer(frame: ScreenFrame, feed: ScreenFeed): void {
    if (this.endedWith !== undefined) return;
    if ((this.needKey || this.keyOnly) && !frame.key) return;
    // A thumbnail shows now: a key frame still waiting is replaced, never queued behind.
    if (this.keyOnly) this.dropFrames();
    if (this.bytes + frame.data.length > VIEWER_MAX_BYTES || this.items.length >= VIEWER_MAX_FRAMES || this.lagMs(frame) > VIEWER_MAX_LAG_MS) {
      this.resyncs++;
      // The feed already holds this frame: its snapshot ends with it.
      this.resync(feed);
      return;
    }
    this.needKey = false;
    this.put({ case: "frame", value: frame });
  }

  /** Starts again from the feed's last key frame (or waits for the next one). */
  resync(feed: ScreenFeed): void {
    this.items = [];
    this.bytes = 0;
    const snap = feed.snapshot();
    this.needKey = !snap.some((i) => i.case === "frame");
    // A thumbnail takes the format and the key frame, not the deltas after it.
    for (const i of this.keyOnly ? snap.filter((i) => i.case === "format" || i.value.key) : snap) this.put(i);
  }

  /** Drops the frames waiting (a format stays: what follows needs it). */
  private dropFrames(): void {
    this.items = this.items.filter((i) => i.case === "format");
    this.bytes = 0;
  }

  /** The stream restarted with a new format: what waits is for the old one. */
  restart(format: ScreenFormat): void {
    this.items = [];
    this.bytes = 0;
    this.needKey = true;
    this.put({ case: "format", value: format });
  }

  end(err: Error | null): void {
    if (this.endedWith !== undefined) return;
    this.endedWith = err;
    this.poke();
  }

  get queuedBytes(): number {
    return this.bytes;
  }

  /** How far the oldest frame still waiting is behind this one. */
  private lagMs(frame: ScreenFrame): number {
    const oldest = this.items.find((i) => i.case === "frame");
    return oldest ? Number(frame.capturedUnixMs - (oldest.value as ScreenFrame).capturedUnixMs) : 0;
  }

  private put(item: ScreenItem): void {
    this.items.push(item);
    if (item.case === "frame") this.bytes += item.value.data.length;
    this.poke();
  }

  private poke(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ScreenItem, void, undefined> {
    for (;;) {
      const item = this.items.shift();
      if (item) {
        if (item.case === "frame") this.bytes -= item.value.data.length;
        yield item;
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
