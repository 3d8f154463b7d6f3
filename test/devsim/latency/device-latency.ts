import { performance } from "node:perf_hooks";
import { latencyProfile, LATENCY_PROFILES, type Delay, type LatencyProfile } from "./latency-profiles.js";

/** The delays of a profile, by name: each is drawn from a stream of its own. */
export type DelayKind = { [K in keyof LatencyProfile]: LatencyProfile[K] extends Delay ? K : never }[keyof LatencyProfile];

/**
 * One phone's latency profile, switchable at run time, and the delays drawn
 * from it. Each kind of delay (a shell's start, a UIAutomator dump, ...) has
 * its own seeded stream, so after `reseed(n)` the k-th dump waits the same
 * whatever else ran before it: a benchmark that reseeds before the raw
 * commands and again before farm's run compares them on the same phone
 * delays (common random numbers), not on two draws of a long-tailed one.
 */
export class DeviceLatency {
  private current: LatencyProfile;
  private seed: number;
  private readonly streams = new Map<DelayKind, Stream>();

  constructor(name = "instant", seed = 1) {
    this.current = latencyProfile(name);
    this.seed = seed >>> 0 || 1;
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

  /** Starts every stream again from `seed`. */
  reseed(seed: number): void {
    this.seed = seed >>> 0 || 1;
    this.streams.clear();
  }

  /** A draw of a delay of the current profile: log-normal with its median and 90th percentile, in ms. */
  draw(kind: DelayKind): number {
    const delay = this.current[kind];
    if (delay.medianMs <= 0) return 0;
    const sigma = delay.p90Ms > delay.medianMs ? Math.log(delay.p90Ms / delay.medianMs) / Z90 : 0;
    return delay.medianMs * Math.exp(sigma * this.stream(kind).normal());
  }

  /** Waits a draw of the delay, times `scale` (megapixels, nodes...), plus `extraMs`; at once when instant. */
  async wait(kind: DelayKind, scale = 1, extraMs = 0): Promise<void> {
    const ms = this.draw(kind) * scale + extraMs;
    if (ms > 0) await sleepPrecisely(ms);
  }

  private stream(kind: DelayKind): Stream {
    let s = this.streams.get(kind);
    if (!s) {
      s = new Stream(this.seed ^ hash(kind));
      this.streams.set(kind, s);
    }
    return s;
  }
}

/**
 * Sleeps `ms` to a fraction of a millisecond. Node's timers keep whole
 * milliseconds and fire relative to the event loop's cached time, so a
 * 2.6 ms delay took about 2.2, and one started from setImmediate (a
 * background job in the shell) took longer than the same delay started from
 * a socket callback: an artifact of the simulator, not of any phone. The
 * timer takes most of it; turns of the event loop take the rest (under a
 * millisecond of CPU per delay, and only under a latency profile).
 */
async function sleepPrecisely(ms: number): Promise<void> {
  const until = performance.now() + ms;
  // A timer of n whole milliseconds fires after n to n + 0.3 on an idle loop: it stops short of the end, the turns finish it.
  if (ms >= 1.5) await new Promise((resolve) => setTimeout(resolve, Math.floor(ms - 0.5)));
  while (performance.now() < until) await new Promise((resolve) => setImmediate(resolve));
}

/** A mulberry32 stream, and standard normals from it by Box-Muller. */
class Stream {
  constructor(private state: number) {}

  normal(): number {
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

/** FNV-1a of a name: a stream's offset from the seed. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The standard normal's 90th percentile. */
const Z90 = 1.2815515655446004;
