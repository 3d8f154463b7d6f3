/**
 * Items between a producer and a consumer with backpressure: `push`
 * resolves once what the queue holds (by `weigh`: bytes, or one per item)
 * is under its limit, so a fast side waits for a slow one instead of
 * filling memory. Consumed once, as an AsyncIterable; leaving the loop
 * closes it.
 */
export class BoundedQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private held = 0;
  private closed = false;
  private readable: (() => void) | undefined;
  private writable: (() => void) | undefined;

  constructor(
    private readonly limit: number,
    private readonly weigh: (item: T) => number = () => 1,
  ) {}

  /** Queues an item; waits while the queue is full. False once closed. */
  async push(item: T): Promise<boolean> {
    while (!this.closed && this.held >= this.limit) await new Promise<void>((resolve) => (this.writable = resolve));
    if (this.closed) return false;
    this.items.push(item);
    this.held += this.weigh(item);
    this.wake("readable");
    return true;
  }

  close(): void {
    this.closed = true;
    this.wake("readable");
    this.wake("writable");
  }

  private wake(which: "readable" | "writable"): void {
    const w = this[which];
    this[which] = undefined;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    try {
      for (;;) {
        if (this.items.length > 0) {
          const item = this.items.shift() as T;
          this.held -= this.weigh(item);
          this.wake("writable");
          yield item;
          continue;
        }
        if (this.closed) return;
        await new Promise<void>((resolve) => (this.readable = resolve));
      }
    } finally {
      this.close();
    }
  }
}
