/** Current slow-link settings; read per packet so faults apply at run time. */
export interface LinkProfile {
  latencyMs?: number | undefined;
  bandwidthBytesPerSec?: number | undefined;
}

/**
 * Delays outgoing bytes like a slow cable: each write leaves after the
 * latency and after the previous write has "drained" at the bandwidth.
 * Order is preserved; with no limits set, writes go straight through.
 */
export class LinkShaper {
  private readonly queue: Array<{ at: number; data: Buffer }> = [];
  private timer: NodeJS.Timeout | undefined;
  /** When the simulated wire is free again (ms timestamp). */
  private wireFreeAt = 0;

  constructor(
    private readonly profile: () => LinkProfile,
    private readonly output: (data: Buffer) => void,
  ) {}

  write(data: Buffer): void {
    const { latencyMs = 0, bandwidthBytesPerSec = 0 } = this.profile();
    if (latencyMs <= 0 && bandwidthBytesPerSec <= 0 && this.queue.length === 0) {
      this.output(data);
      return;
    }
    const now = Date.now();
    const start = Math.max(now, this.wireFreeAt);
    const transmit = bandwidthBytesPerSec > 0 ? (data.length / bandwidthBytesPerSec) * 1000 : 0;
    this.wireFreeAt = start + transmit;
    this.queue.push({ at: this.wireFreeAt + latencyMs, data });
    this.arm();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }

  private arm(): void {
    if (this.timer || this.queue.length === 0) return;
    const wait = Math.max(0, this.queue[0]!.at - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const now = Date.now();
      while (this.queue.length > 0 && this.queue[0]!.at <= now) this.output(this.queue.shift()!.data);
      this.arm();
    }, wait);
  }
}
