import { create } from "@bufbuild/protobuf";
import { Backoff } from "@farm/shared/backoff";
import type { Logger } from "@farm/shared/log";
import { DeviceReportSchema, type DeviceReport } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { DeviceProperties } from "@farm/shared/gen/farm/v1/registry_pb";
import type { AdbClient, AdbServerAddress } from "./adb-client.js";
import { AdbDeviceTracker, type AdbDeviceEntry } from "./adb-device-tracker.js";
import { readDeviceProperties } from "./device-properties.js";

export type DeviceEvent = { kind: "upsert"; report: DeviceReport } | { kind: "removed"; serial: string };

interface Known {
  state: string;
  properties: DeviceProperties | undefined;
  /** Bumped on every state change so a slow property read cannot land late. */
  generation: number;
}

export interface DeviceWatcherOptions {
  adb: AdbClient;
  server: AdbServerAddress;
  log: Logger;
  /** Upper bound for reading one device's properties. */
  propertyTimeoutMs?: number;
  backoff?: { initialMs: number; maxMs: number };
  /**
   * Checked before each (re)connection; when it says no, tracking waits and
   * retries instead of letting adbkit start a server of its own.
   */
  serverAvailable?: () => Promise<boolean>;
}

/**
 * Follows the adb server's device list (host:track-devices) and keeps the
 * properties of every online device. When the adb server goes away (restart,
 * crash) tracking is re-established with backoff; the first list from the new
 * server is reconciled against what was known, so vanished devices are removed.
 */
export class DeviceWatcher {
  private readonly known = new Map<string, Known>();
  private readonly listeners = new Set<(e: DeviceEvent) => void>();
  private readonly backoff: Backoff;
  private stopped = false;
  private tracker: AdbDeviceTracker | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private adbVersionText = "";

  constructor(private readonly opts: DeviceWatcherOptions) {
    this.backoff = new Backoff(opts.backoff ?? { initialMs: 200, maxMs: 5_000 });
  }

  get adbVersion(): string {
    return this.adbVersionText;
  }

  start(): void {
    void this.track();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.tracker?.stop();
  }

  onEvent(listener: (e: DeviceEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  snapshot(): DeviceReport[] {
    return [...this.known.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([serial, k]) => this.report(serial, k));
  }

  private report(serial: string, k: Known): DeviceReport {
    return create(DeviceReportSchema, { serial, state: k.state, ...(k.properties ? { properties: k.properties } : {}) });
  }

  private emit(e: DeviceEvent): void {
    for (const l of this.listeners) l(e);
  }

  private async track(): Promise<void> {
    if (this.stopped) return;
    try {
      if (this.opts.serverAvailable && !(await this.opts.serverAvailable())) {
        throw new Error("adb server is not running (and starting it is disabled)");
      }
      // Through adbkit, which starts the server when absent (unless disabled above).
      this.adbVersionText = String(await this.opts.adb.version());
      if (this.stopped) return;
      const tracker = new AdbDeviceTracker();
      this.tracker = tracker;
      tracker.on("list", (list: AdbDeviceEntry[]) => {
        this.backoff.reset();
        this.reconcile(list);
      });
      tracker.once("end", (err: Error | undefined) => {
        if (this.tracker !== tracker) return;
        this.tracker = undefined;
        this.scheduleRetry(err?.message ?? "adb tracking ended");
      });
      tracker.start(this.opts.server);
    } catch (err) {
      this.scheduleRetry((err as Error).message);
    }
  }

  private scheduleRetry(reason: string): void {
    if (this.stopped) return;
    const delay = this.backoff.next();
    this.opts.log.warn("adb device tracking lost; retrying", { reason, delayMs: delay });
    this.retryTimer = setTimeout(() => void this.track(), delay);
  }

  /** Applies a complete device list from adb. */
  private reconcile(current: AdbDeviceEntry[]): void {
    const present = new Set(current.map((d) => d.serial));
    for (const serial of [...this.known.keys()]) if (!present.has(serial)) this.remove(serial);
    for (const d of current) this.setState(d.serial, d.state);
  }

  private setState(serial: string, state: string): void {
    const prev = this.known.get(serial);
    if (prev && prev.state === state) return;
    const k: Known = { state, properties: prev?.properties, generation: (prev?.generation ?? 0) + 1 };
    this.known.set(serial, k);
    this.emit({ kind: "upsert", report: this.report(serial, k) });
    if (state === "device") void this.loadProperties(serial, k.generation);
  }

  private remove(serial: string): void {
    if (!this.known.delete(serial)) return;
    this.emit({ kind: "removed", serial });
  }

  private async loadProperties(serial: string, generation: number): Promise<void> {
    const timeoutMs = this.opts.propertyTimeoutMs ?? 10_000;
    let timer: NodeJS.Timeout | undefined;
    try {
      const props = await Promise.race([
        readDeviceProperties(this.opts.adb.getDevice(serial)),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
      const k = this.known.get(serial);
      if (!k || k.generation !== generation) return;
      k.properties = props;
      this.emit({ kind: "upsert", report: this.report(serial, k) });
    } catch (err) {
      this.opts.log.warn("could not read device properties", { serial, error: (err as Error).message });
    } finally {
      clearTimeout(timer);
    }
  }
}
