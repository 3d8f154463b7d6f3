/**
 * How many frames screenrecord has handed its encoder on one phone, over
 * every recording. Tests wait on it before stopping a recording: a stop
 * before the second frame leaves no media timeline (VIDEO_EMPTY), and a
 * wall-clock pause is no promise that the encoder has read anything under load.
 */
export class FrameCount {
  private count = 0;
  private waiters: { target: number; resolve: () => void }[] = [];

  get value(): number {
    return this.count;
  }

  add(): void {
    this.count++;
    this.waiters = this.waiters.filter((w) => (w.target <= this.count ? (w.resolve(), false) : true));
  }

  /** Resolves once the count reaches target (at once if it has). */
  reached(target: number): Promise<void> {
    if (this.count >= target) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ target, resolve }));
  }
}
