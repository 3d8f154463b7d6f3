import { BoundedQueue } from "@farm/shared/bounded-queue";
import { Errors, farmError } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";

/** What one kind of phone stream (the live screen, the live logcat) needs from the registry. */
export interface PhoneStreamKind<Req> {
  /** "live screen", "live logcat": in errors and logs. */
  readonly noun: string;
  /** Streams of this kind one agent runs at once (a coordinator asks for one per phone). */
  readonly max: number;
  /** Messages waiting for the coordinator before the phone is no longer read. */
  readonly queued: number;
  /** The coordinator's call that takes the stream (tests stand in for it). */
  serve(requests: AsyncIterable<Req>, signal: AbortSignal): AsyncIterable<unknown>;
  /** The call's first message, naming the stream. */
  opening(streamId: string): Req;
  /** Reads the phone and sends what it reads until `signal` aborts (or the phone goes away). */
  produce(serial: string, send: (message: Req) => Promise<void>, signal: AbortSignal): Promise<void>;
  readonly log: Logger;
}

/**
 * The phone streams of one kind this agent runs, by stream id. Each reads its
 * phone and sends on its own call until the coordinator ends the call (the
 * last viewer left), the agent stops, or the phone goes away. Nothing here
 * changes the phone: no lock is taken.
 */
export class PhoneStreams<Req> {
  private readonly streams = new Map<string, AbortController>();

  constructor(private readonly kind: PhoneStreamKind<Req>) {}

  start(streamId: string, serial: string): void {
    const { noun, max } = this.kind;
    if (this.streams.has(streamId)) throw farmError(Errors.ALREADY_EXISTS, `${noun} ${streamId} is already streaming`, "stream_id");
    if (this.streams.size >= max) throw farmError(Errors.RESOURCE_EXHAUSTED, `this agent already streams ${this.streams.size} ${noun}s`, "stream_id");
    const stop = new AbortController();
    this.streams.set(streamId, stop);
    void this.run(streamId, serial, stop).finally(() => {
      if (this.streams.get(streamId) === stop) this.streams.delete(streamId);
    });
  }

  get size(): number {
    return this.streams.size;
  }

  stopAll(): void {
    for (const s of this.streams.values()) s.abort();
  }

  private async run(streamId: string, serial: string, stop: AbortController): Promise<void> {
    // Bounded: a slow coordinator slows the phone's read instead of filling memory.
    const outgoing = new BoundedQueue<Req>(this.kind.queued);
    stop.signal.addEventListener("abort", () => outgoing.close(), { once: true });
    await outgoing.push(this.kind.opening(streamId));
    // The call's end (the coordinator is done with it) stops the phone's read.
    const call = (async () => {
      try {
        for await (const _ of this.kind.serve(outgoing, stop.signal)) {
          // Nothing is sent this way.
        }
      } catch {
        // The coordinator went away, or we stopped.
      } finally {
        stop.abort();
      }
    })();
    try {
      // Stopped before the first read (stopAll, or the call ended at once): the phone is not read at all.
      if (!stop.signal.aborted) await this.kind.produce(serial, async (message) => void (await outgoing.push(message)), stop.signal);
    } catch (err) {
      if (!stop.signal.aborted) this.kind.log.warn(`${this.kind.noun} ended`, { serial, streamId, error: (err as Error).message });
    } finally {
      stop.abort();
      outgoing.close();
      await call;
    }
  }
}
