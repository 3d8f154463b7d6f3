/**
 * Bytes a part of the agent may hold for remote adb: a tunnel's budget has
 * the agent's as its parent, so a byte taken counts in both. Nothing is
 * ever refused: whoever would go over waits (`room`) until bytes are
 * released, and the stream it serves stalls instead of the agent growing.
 * A lone chunk larger than a whole budget fits once nothing else is held,
 * so a budget smaller than one message slows a stream but never wedges it.
 */
export class ByteBudget {
  private used = 0;
  private highest = 0;
  private waiters: (() => void)[] = [];

  constructor(
    readonly limit: number,
    private readonly parent?: ByteBudget,
  ) {
    if (!Number.isSafeInteger(limit) || limit <= 0) throw new RangeError(`a byte budget must be a positive whole number of bytes, not ${limit}`);
  }

  /** Bytes held now. */
  get held(): number {
    return this.used;
  }

  /** The most bytes ever held at once. */
  get peak(): number {
    return this.highest;
  }

  /** Whether `n` more bytes fit here and in every parent. */
  fits(n: number): boolean {
    return (this.used === 0 || this.used + n <= this.limit) && (this.parent?.fits(n) ?? true);
  }

  /** Counts `n` bytes as held (here and in every parent), fitting or not: the caller waited with `room` first, or cannot wait. */
  take(n: number): void {
    this.used += n;
    this.highest = Math.max(this.highest, this.used);
    this.parent?.take(n);
  }

  release(n: number): void {
    this.used = Math.max(0, this.used - n);
    this.parent?.release(n);
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** Resolves once `n` bytes fit, or once `signal` aborts (the caller checks it). */
  async room(n: number, signal: AbortSignal): Promise<void> {
    while (!this.fits(n) && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener("abort", done);
          resolve();
        };
        signal.addEventListener("abort", done, { once: true });
        // A release anywhere up the chain may make room: wait on each.
        for (let b: ByteBudget | undefined = this; b; b = b.parent) b.waiters.push(done);
      });
    }
  }
}
