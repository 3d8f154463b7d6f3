/** Bytes a queue holds before its producer waits. */
const HIGH_WATER = 2 * 1024 * 1024;

/**
 * Bytes between two streams with backpressure: `push` resolves once the
 * queue is under its high-water mark, so a fast side (a device streaming
 * logcat) waits for a slow one (a caller across the world) instead of
 * filling the coordinator's memory. Consumed as an AsyncIterable.
 */
export class ByteQueue implements AsyncIterable<Uint8Array> {
  private readonly items: Uint8Array[] = [];
  private held = 0;
  private closed = false;
  private readable: (() => void) | undefined;
  private writable: (() => void) | undefined;

  constructor(private readonly highWater = HIGH_WATER) {}

  /** Queues bytes; waits while the queue is full. False once closed. */
  async push(bytes: Uint8Array): Promise<boolean> {
    while (!this.closed && this.held >= this.highWater) await new Promise<void>((resolve) => (this.writable = resolve));
    if (this.closed) return false;
    this.items.push(bytes);
    this.held += bytes.length;
    this.wake("readable");
    return true;
  }

  close(): void {
    this.closed = true;
    this.wake("readable");
    this.wake("writable");
  }

  private wake(which: "readable" | "writable"): void {
    const n = this[which];
    this[which] = undefined;
    n?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Uint8Array, void, undefined> {
    try {
      for (;;) {
        const next = this.items.shift();
        if (next) {
          this.held -= next.length;
          this.wake("writable");
          yield next;
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
