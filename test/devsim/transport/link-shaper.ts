import { performance } from "node:perf_hooks";

/** Current slow-link settings; read per packet so faults apply at run time. */
export interface LinkProfile {
  latencyMs?: number | undefined;
  bandwidthBytesPerSec?: number | undefined;
}

/**
 * Delays outgoing bytes like a slow cable: each write leaves after the
 * latency and after the previous write has "drained" at the bandwidth.
 * Order is preserved; with no limits set, writes go straight through.
 *
 * Node's timers have whole milliseconds (and no less than one), and a USB
 * link's delay is a fraction of one: each delay is dithered between the
 * whole milliseconds around it (the next turn of the event loop standing
 * for zero), so delays keep their mean instead of all becoming 1-2 ms.
 */
export class LinkShaper {
  private readonly queue: Array<{ at: number; data: Buffer }> = [];
  private timer: { timeout: NodeJS.Timeout } | { immediate: NodeJS.Immediate } | undefined;
  /** When the simulated wire is free again (performance.now() ms). */
  private wireFreeAt = 0;

  constructor(
    private readonly profile: () => LinkProfile,
    private readonly output: (data: Buffer) => void,
    /** Uniform in [0, 1): picks each dithered delay (tests pass their own). */
    private readonly random: () => number = Math.random,
  ) {}

  write(data: Buffer): void {
    const { latencyMs = 0, bandwidthBytesPerSec = 0 } = this.profile();
    if (latencyMs <= 0 && bandwidthBytesPerSec <= 0 && this.queue.length === 0) {
      this.output(data);
      return;
    }
    const now = performance.now();
    const start = Math.max(now, this.wireFreeAt);
    const transmit = bandwidthBytesPerSec > 0 ? (data.length / bandwidthBytesPerSec) * 1000 : 0;
    this.wireFreeAt = start + transmit;
    this.queue.push({ at: this.wireFreeAt + latencyMs, data });
    this.arm();
  }

  stop(): void {
    this.cancel();
    this.queue.length = 0;
  }

  private cancel(): void {
    if (this.timer === undefined) return;
    if ("timeout" in this.timer) clearTimeout(this.timer.timeout);
    else clearImmediate(this.timer.immediate);
    this.timer = undefined;
  }

  private arm(): void {
    if (this.timer !== undefined || this.queue.length === 0) return;
    const wait = this.queue[0]!.at - performance.now();
    const whole = Math.floor(Math.max(0, wait));
    const ms = whole + (this.random() < Math.max(0, wait) - whole ? 1 : 0);
    // The head leaves when its dithered time comes, with whatever is due behind it.
    const fire = () => {
      this.timer = undefined;
      const head = this.queue.shift();
      if (head) this.output(head.data);
      const now = performance.now();
      while (this.queue.length > 0 && this.queue[0]!.at <= now) this.output(this.queue.shift()!.data);
      this.arm();
    };
    this.timer = ms === 0 ? { immediate: setImmediate(fire) } : { timeout: setTimeout(fire, ms) };
  }
}
