import type { DispatchProgress } from "../ownership/device-ownership.js";
import type { AdbStreamRelay } from "./adb-stream.js";
import type { ByteBudget } from "./byte-budget.js";

/** What a later report needs about one tunnel. */
export interface TunnelInfo {
  tunnelId: string;
  serial: string;
  physicalId: string;
  requestedBy: string;
  /** Empty until the raw-adb action runs (the device lock is taken). */
  actionId: string;
  openedAt: number;
  bytesToDevice: number;
  bytesFromDevice: number;
  openStreams: number;
}

/** How long streams get to wind down when their tunnel closes. */
const STREAMS_CLOSE_MS = 2_000;

/**
 * One open remote adb tunnel on this agent: the exact serial it reaches,
 * its streams, its byte counts. It lives from StartAdbTunnel until its
 * raw-adb action has settled.
 */
export class AdbTunnel {
  private readonly stopper = new AbortController();
  private reason = "";
  private progress: DispatchProgress | undefined;
  private resolveEnded!: () => void;
  /** Open streams by stream id; undefined while the device is still accepting the service. */
  readonly streams = new Map<string, AdbStreamRelay | undefined>();
  readonly openedAt = Date.now();
  actionId = "";
  physicalId = "";
  bytesToDevice = 0;
  bytesFromDevice = 0;
  streamsOpened = 0;
  /** Whether a service request was ever sent to the device through this tunnel. */
  used = false;
  /** Resolves once the tunnel's action has settled (or never started). */
  readonly ended = new Promise<void>((resolve) => (this.resolveEnded = resolve));

  constructor(
    readonly tunnelId: string,
    readonly serial: string,
    readonly requestedBy: string,
    /** What this tunnel's streams may hold in the agent, both ways. */
    readonly budget: ByteBudget,
    /** The lease the tunnel was opened under (empty from an older coordinator). */
    readonly leaseId = "",
  ) {}

  /** Aborted when the tunnel is told to close. */
  get signal(): AbortSignal {
    return this.stopper.signal;
  }

  /** Open: told to close neither by the coordinator nor by this agent. */
  get open(): boolean {
    return !this.stopper.signal.aborted;
  }

  /** Running: its action holds the device lock and it is not closing. */
  get running(): boolean {
    return this.open && this.actionId !== "";
  }

  get stopReason(): string {
    return this.reason;
  }

  stop(reason: string): void {
    if (!this.open) return;
    this.reason = reason;
    this.stopper.abort();
  }

  /** Called by the raw-adb action once it holds the device lock. */
  attach(actionId: string, physicalId: string, progress: DispatchProgress): void {
    this.actionId = actionId;
    this.physicalId = physicalId;
    this.progress = progress;
  }

  /** Before the first service request goes to the device: from now on the phone may change in any way. */
  markUsed(): void {
    if (this.used) return;
    this.used = true;
    if (this.progress) {
      this.progress.phase = "accepted";
      this.progress.note({ firstStreamAt: Date.now() });
    }
  }

  /** Resolves with the reason once the tunnel is told to close, or when `signal` (the action's deadline) aborts. */
  until(signal: AbortSignal): Promise<string> {
    return new Promise((resolve) => {
      const done = () => {
        signal.removeEventListener("abort", onDeadline);
        this.signal.removeEventListener("abort", done);
        resolve(this.reason);
      };
      const onDeadline = () => {
        this.stop("the tunnel reached its time limit");
        done();
      };
      if (!this.open) return done();
      if (signal.aborted) return onDeadline();
      signal.addEventListener("abort", onDeadline, { once: true });
      this.signal.addEventListener("abort", done, { once: true });
    });
  }

  /** Cuts every stream and waits (briefly) until they are gone. */
  async closeStreams(): Promise<void> {
    const relays = [...this.streams.values()].filter((r): r is AdbStreamRelay => r !== undefined);
    for (const r of relays) r.close();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(relays.map((r) => r.done)), new Promise((r) => (timer = setTimeout(r, STREAMS_CLOSE_MS)))]);
    clearTimeout(timer);
  }

  /** Marks the tunnel gone for good (its action settled or never ran). */
  finish(): void {
    this.stop(this.reason || "the tunnel's action ended");
    this.resolveEnded();
  }

  info(): TunnelInfo {
    return {
      tunnelId: this.tunnelId,
      serial: this.serial,
      physicalId: this.physicalId,
      requestedBy: this.requestedBy,
      actionId: this.actionId,
      openedAt: this.openedAt,
      bytesToDevice: this.bytesToDevice,
      bytesFromDevice: this.bytesFromDevice,
      openStreams: [...this.streams.values()].filter((r) => r !== undefined).length,
    };
  }

  /**
   * The journal's receipt: a raw session's effect on the phone cannot be
   * proven, so it says so; only a tunnel that never sent a request can say
   * it changed nothing.
   */
  receipt(reason: string): Record<string, unknown> {
    return {
      tunnelId: this.tunnelId,
      changes: this.used ? "unknown" : "none",
      provenBy: this.used
        ? "tunnel closed by this agent; what its raw adb streams changed on the phone cannot be proven"
        : "tunnel closed by this agent before any adb service was requested",
      reason,
      streams: this.streamsOpened,
      bytesToDevice: this.bytesToDevice,
      bytesFromDevice: this.bytesFromDevice,
      openedAt: this.openedAt,
      closedAt: Date.now(),
    };
  }
}
