import { EventEmitter } from "node:events";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { WatchResponseSchema, type WatchResponse } from "@farm/shared/gen/farm/v1/watch_service_pb";

/** Events a watcher may fall behind by before it is cut off (it then reconnects and re-reads). */
const MAX_PENDING = 20_000;
const KEEPALIVE_MS = 15_000;

type Kind = MessageInitShape<typeof WatchResponseSchema>["kind"];

export interface WatchHubEvents {
  /** The number of watchers changed. */
  watchers: [count: number];
}

interface Subscriber {
  items: WatchResponse[];
  wake: (() => void) | undefined;
  overflowed: boolean;
  /** Why the stream is ended at once (set by cutAll). */
  cut: Error | undefined;
}

/**
 * Fans changes out to live watchers. Publishing costs nothing without
 * watchers; each watcher has a bounded backlog, and one that falls behind
 * is ended with RESOURCE_EXHAUSTED rather than slowing anyone else.
 */
export class WatchHub {
  readonly events = new EventEmitter<WatchHubEvents>();
  private readonly subscribers = new Set<Subscriber>();

  get size(): number {
    return this.subscribers.size;
  }

  publish(kind: Kind): void {
    if (this.subscribers.size === 0) return;
    const msg = create(WatchResponseSchema, { kind });
    for (const s of this.subscribers) {
      if (s.overflowed) continue;
      if (s.items.length >= MAX_PENDING) s.overflowed = true;
      else s.items.push(msg);
      const wake = s.wake;
      s.wake = undefined;
      wake?.();
    }
  }

  /**
   * Ends every watcher's stream with `err`: what they were told may be
   * incomplete (changes on other replicas may have been missed), so they
   * reconnect and re-read the lists.
   */
  cutAll(err: Error): void {
    for (const s of this.subscribers) {
      s.cut ??= err;
      const wake = s.wake;
      s.wake = undefined;
      wake?.();
    }
  }

  /** Every event published from now on, `ready` first, until the signal aborts. */
  async *subscribe(signal: AbortSignal): AsyncGenerator<WatchResponse> {
    const sub: Subscriber = { items: [create(WatchResponseSchema, { kind: { case: "ready", value: {} } })], wake: undefined, overflowed: false, cut: undefined };
    this.subscribers.add(sub);
    const onAbort = () => sub.wake?.();
    signal.addEventListener("abort", onAbort);
    try {
      this.events.emit("watchers", this.subscribers.size);
      for (;;) {
        if (signal.aborted) return;
        if (sub.cut) throw sub.cut;
        if (sub.overflowed) throw new ConnectError("watcher fell too far behind; reconnect and re-read the lists", Code.ResourceExhausted);
        const next = sub.items.shift();
        if (next) {
          yield next;
          continue;
        }
        const idle = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(true), KEEPALIVE_MS);
          sub.wake = () => {
            clearTimeout(timer);
            resolve(false);
          };
        });
        if (idle && !signal.aborted) yield create(WatchResponseSchema, { kind: { case: "keepalive", value: {} } });
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      this.subscribers.delete(sub);
      this.events.emit("watchers", this.subscribers.size);
    }
  }
}
