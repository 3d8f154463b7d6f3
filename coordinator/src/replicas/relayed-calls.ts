/** How long a cancel that came before its call is kept: the call is at most one hop behind it. */
export const EARLY_CANCEL_KEEP_MS = 30_000;
/** The most early cancels kept at once; beyond it the oldest is forgotten (a replica sends one per call it relays). */
export const EARLY_CANCEL_MAX = 10_000;

/**
 * Calls another replica relays to an agent on this one (CallAgent), by the
 * relay id that replica chose, so its CancelAgentCall can abort the one it
 * names. The two RPCs travel separately, so a cancel may come first: it is
 * kept for a while (bounded) and applied when its call begins.
 */
export class RelayedCalls {
  readonly #running = new Map<string, AbortController>();
  readonly #early = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly keepMs = EARLY_CANCEL_KEEP_MS,
    private readonly max = EARLY_CANCEL_MAX,
  ) {}

  /** A call begins: its signal aborts on a cancel (already, if one came first); end() when it is answered. */
  begin(agentId: string, relayId: string): { signal: AbortSignal; end(): void } {
    const ctl = new AbortController();
    if (relayId === "") return { signal: ctl.signal, end: () => {} };
    const key = keyOf(agentId, relayId);
    const early = this.#early.get(key);
    if (early !== undefined) {
      clearTimeout(early);
      this.#early.delete(key);
      ctl.abort(cancelReason());
    } else this.#running.set(key, ctl);
    return {
      signal: ctl.signal,
      end: () => {
        if (this.#running.get(key) === ctl) this.#running.delete(key);
      },
    };
  }

  /** The caller went away: aborts the call if it is running here (true), or keeps the cancel for it. */
  cancel(agentId: string, relayId: string): boolean {
    if (relayId === "") return false;
    const key = keyOf(agentId, relayId);
    const ctl = this.#running.get(key);
    if (ctl) {
      this.#running.delete(key);
      ctl.abort(cancelReason());
      return true;
    }
    if (this.#early.has(key)) return false;
    if (this.#early.size >= this.max) {
      const [oldest, timer] = this.#early.entries().next().value as [string, NodeJS.Timeout];
      clearTimeout(timer);
      this.#early.delete(oldest);
    }
    const timer = setTimeout(() => this.#early.delete(key), this.keepMs);
    timer.unref();
    this.#early.set(key, timer);
    return false;
  }

  /** Calls running now, and cancels waiting for their call (for tests). */
  get size(): { running: number; early: number } {
    return { running: this.#running.size, early: this.#early.size };
  }
}

const keyOf = (agentId: string, relayId: string) => `${agentId}\n${relayId}`;

/** Not a deadline: AttachSession sends AgentCallCancel for any other reason. */
const cancelReason = () => new Error("the caller on the other replica went away");
