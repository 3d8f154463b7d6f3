export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** Source of randomness in [0, 1); injectable for tests. */
  random?: () => number;
}

/**
 * Exponential backoff with full jitter: attempt n waits a uniform random time
 * in [0, min(max, initial·2ⁿ)], so a coordinator restart is not met by a
 * thundering herd of agents reconnecting in lockstep.
 */
export class Backoff {
  private attempt = 0;

  constructor(private readonly opts: BackoffOptions) {}

  next(): number {
    const cap = Math.min(this.opts.maxMs, this.opts.initialMs * 2 ** this.attempt);
    this.attempt = Math.min(this.attempt + 1, 30);
    const random = this.opts.random ?? Math.random;
    return Math.max(1, Math.floor(random() * cap));
  }

  reset(): void {
    this.attempt = 0;
  }
}
