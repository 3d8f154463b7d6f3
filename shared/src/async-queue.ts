/**
 * An unbounded push queue consumed as an AsyncIterable: the outgoing half of
 * a bidi stream. Producers push small control messages; bulk data never goes
 * through here. Iterating is a generator, so it supports return() and throw()
 * as stream libraries expect.
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private notify: (() => void) | undefined;
  private closed = false;

  push(item: T): boolean {
    if (this.closed) return false;
    this.items.push(item);
    this.wake();
    return true;
  }

  close(): void {
    this.closed = true;
    this.wake();
  }

  private wake(): void {
    const n = this.notify;
    this.notify = undefined;
    n?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    try {
      for (;;) {
        if (this.items.length > 0) {
          yield this.items.shift() as T;
          continue;
        }
        if (this.closed) return;
        await new Promise<void>((resolve) => {
          this.notify = resolve;
        });
      }
    } finally {
      this.close();
    }
  }
}
