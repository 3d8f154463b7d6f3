import { latencyProfile, LATENCY_PROFILES, type Delay, type LatencyProfile } from './latency-profiles.js';

/**
 * One phone's latency profile, switchable at run time, and the delays drawn
 * from it. Draws come from a seeded generator, so a benchmark run with the
 * same seed sees the same sequence of delays.
 */
export class DeviceLatency {
  private current: LatencyProfile;
  private state: number;

  constructor(name = 'instant', seed = 1) {
    this.current = latencyProfile(name);
    this.state = seed >>> 0 || 1;
  }

  get profile(): LatencyProfile {
    return this.current;
  }

  get instant(): boolean {
    return this.current === LATENCY_PROFILES.instant;
  }

  set(name: string): void {
    this.current = latencyProfile(name);
  }

  reseed(seed: number): void {
    this.state = seed >>> 0 || 1;
  }

  /** A draw from a delay: log-normal with the given median and 90th percentile, in ms. */
  draw(delay: Delay): number {
    if (delay.medianMs <= 0) return 0;
    const sigma = delay.p90Ms > delay.medianMs ? Math.log(delay.p90Ms / delay.medianMs) / Z90 : 0;
    return delay.medianMs * Math.exp(sigma * this.normal());
  }

  /** Waits a draw of the delay, times `scale` (megapixels, nodes...); at once when instant. */
  async wait(delay: Delay, scale = 1, extraMs = 0): Promise<void> {
    const ms = this.draw(delay) * scale + extraMs;
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
  }

  /** Standard normal by Box-Muller over a mulberry32 stream. */
  private normal(): number {
    const u = Math.max(this.uniform(), Number.EPSILON);
    const v = this.uniform();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  private uniform(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
}

/** The standard normal's 90th percentile. */
const Z90 = 1.2815515655446004;
