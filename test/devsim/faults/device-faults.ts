import type { FaultSettings } from "./fault-settings.js";

/**
 * The faults switched on for one device, changeable at run time by tests
 * (`device.faults.set({...})`), the control API and scenario schedules.
 */
export class DeviceFaults {
  private settings: FaultSettings = {};
  private transferred = 0;
  private readonly heldOpens: (() => void)[] = [];
  private heldSeen = 0;
  private readonly heldWaiters: { count: number; resolve: () => void }[] = [];
  /** Called when vanishAfterBytes is reached; wired to SimDevice.vanish(). */
  onVanish: () => void = () => {};

  get current(): Readonly<FaultSettings> {
    return this.settings;
  }

  /** Merges settings; a key set to null or undefined clears that fault. */
  set(changes: { [K in keyof FaultSettings]?: FaultSettings[K] | null }): void {
    const next: Record<string, unknown> = { ...this.settings };
    for (const [key, value] of Object.entries(changes)) {
      if (value === null || value === undefined) delete next[key];
      else next[key] = value;
    }
    if ("vanishAfterBytes" in changes) this.transferred = 0;
    this.settings = next as FaultSettings;
  }

  clear(): void {
    this.settings = {};
    this.transferred = 0;
    this.releaseHeld();
  }

  /**
   * For a service the holdServicesContaining fault matches: a promise that settles when the test
   * releases it (the connection then opens it); undefined when the service runs now.
   */
  hold(service: string): Promise<void> | undefined {
    if (!this.settings.holdServicesContaining?.some((part) => service.includes(part))) return undefined;
    return new Promise<void>((resolve) => {
      this.heldOpens.push(resolve);
      this.heldSeen++;
      for (const waiter of this.heldWaiters.filter((w) => this.heldSeen >= w.count)) {
        this.heldWaiters.splice(this.heldWaiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    });
  }

  /** Resolves once `count` services in all have been held since this device started (the event tests wait on). */
  held(count = 1): Promise<void> {
    if (this.heldSeen >= count) return Promise.resolve();
    return new Promise<void>((resolve) => this.heldWaiters.push({ count, resolve }));
  }

  /** Opens every held service now, in the order they arrived; returns how many. */
  releaseHeld(): number {
    const opens = this.heldOpens.splice(0);
    for (const open of opens) open();
    return opens.length;
  }

  /** Counts file bytes moved over sync; true (and vanishes) once the limit is reached. */
  countTransfer(bytes: number): boolean {
    const limit = this.settings.vanishAfterBytes;
    if (limit === undefined) return false;
    this.transferred += bytes;
    if (this.transferred < limit) return false;
    this.set({ vanishAfterBytes: null });
    this.onVanish();
    return true;
  }

  /** Bytes of a transfer allowed before the vanish point (Infinity when unset). */
  remainingBeforeVanish(): number {
    const limit = this.settings.vanishAfterBytes;
    return limit === undefined ? Infinity : Math.max(0, limit - this.transferred);
  }

  isHung(service: string): boolean {
    return this.settings.hangServices?.some((prefix) => service.startsWith(prefix)) ?? false;
  }
}
