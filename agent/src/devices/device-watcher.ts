import { create, equals } from "@bufbuild/protobuf";
import { Backoff } from "@farm/shared/backoff";
import type { Logger } from "@farm/shared/log";
import { DeviceReportSchema, type DeviceReport } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { AdbClient, AdbServerAddress } from "../adb/adb-client.js";
import { AdbDeviceTracker, type AdbDeviceEntry } from "../adb/adb-device-tracker.js";
import { readDeviceFacts, toDeviceProperties, type DeviceFacts, type DeviceIdentity } from "./device-properties.js";
import { findDuplicateIdentities, physicalIdOf } from "./physical-identity.js";

export type DeviceEvent = { kind: "upsert"; report: DeviceReport } | { kind: "removed"; serial: string };

interface Known {
  state: string;
  facts: DeviceFacts | undefined;
  identity: DeviceIdentity | undefined;
  /** Bumped on every state change so a slow property read cannot land late. */
  generation: number;
}

export interface DeviceWatcherOptions {
  adb: AdbClient;
  server: AdbServerAddress;
  log: Logger;
  /** Upper bound for reading one device's properties. */
  propertyTimeoutMs?: number;
  /**
   * Waits between reads of an online phone's properties after one failed
   * (doubling up to maxMs); without its identity the phone is listed
   * identity-pending and cannot be leased by serial.
   */
  propertyRetry?: { initialMs: number; maxMs: number };
  backoff?: { initialMs: number; maxMs: number };
  /**
   * Checked before each (re)connection; when it says no, tracking waits and
   * retries instead of letting adbkit start a server of its own.
   */
  serverAvailable?: () => Promise<boolean>;
  /** How often the full device list is re-read besides tracking. */
  pollIntervalMs?: number;
  /** The operator pin for a serial (see physical-identity.ts). */
  pinFor?: (serial: string) => string;
  /** Told when a device's properties have been read (reboot tracking). */
  onFacts?: (serial: string, physicalId: string, facts: DeviceFacts) => void;
  /** Told when serials start or stop being flagged as duplicate identities. */
  onDuplicate?: (serial: string, physicalId: string, duplicate: boolean) => void;
}

/** What the agent knows about one online serial, for actions. */
export interface DeviceView {
  serial: string;
  state: string;
  facts: DeviceFacts;
  identity: DeviceIdentity;
}

/** The state of a phone whose adb server is gone: still listed, not usable, not leasable. */
export const ADB_UNAVAILABLE = "unavailable";

/**
 * Follows the adb server's device list (host:track-devices) and keeps the
 * properties of every online device. When the adb server goes away (restart,
 * crash) its phones turn `unavailable` at once (nothing can reach them, and
 * saying `device` would let leases and actions pick them), and tracking is
 * re-established with backoff; the first list from the new server is
 * reconciled against what was known, so vanished devices are removed and the
 * others take the state adb gives them.
 */
export class DeviceWatcher {
  private readonly known = new Map<string, Known>();
  private readonly listeners = new Set<(e: DeviceEvent) => void>();
  private readonly backoff: Backoff;
  private stopped = false;
  private tracker: AdbDeviceTracker | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  /** Property reads scheduled again after a failure, by serial. */
  private readonly propertyRetries = new Map<string, { timer: NodeJS.Timeout; attempt: number }>();
  private adbVersionText = "";

  constructor(private readonly opts: DeviceWatcherOptions) {
    this.backoff = new Backoff(opts.backoff ?? { initialMs: 200, maxMs: 5_000 });
  }

  get adbVersion(): string {
    return this.adbVersionText;
  }

  start(): void {
    void this.track();
    // adb 29 does not always push a TCP device's drop to offline on
    // track-devices; a periodic host:devices read catches what it misses.
    this.pollTimer = setInterval(() => void this.poll(), this.opts.pollIntervalMs ?? 2_000);
    this.pollTimer.unref();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.pollTimer);
    clearTimeout(this.retryTimer);
    for (const serial of [...this.propertyRetries.keys()]) this.cancelPropertyRetry(serial);
    this.tracker?.stop();
  }

  onEvent(listener: (e: DeviceEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The device behind a serial, if its properties are known. */
  device(serial: string): DeviceView | undefined {
    const k = this.known.get(serial);
    if (!k || !k.facts || !k.identity) return undefined;
    return { serial, state: k.state, facts: k.facts, identity: k.identity };
  }

  /** Online phones whose properties will be read again after a failed read. */
  get pendingIdentityReads(): number {
    return this.propertyRetries.size;
  }

  /** Serials on this agent that are the same physical device. */
  aliasesOf(physicalId: string): string[] {
    return [...this.known.entries()]
      .filter(([, k]) => k.identity?.physicalId === physicalId)
      .map(([serial]) => serial)
      .sort();
  }

  /** Re-derives identities after a pin changed. */
  refreshIdentities(): void {
    for (const [serial, k] of this.known) {
      if (k.facts) k.identity = this.identify(serial, k.facts);
    }
    this.markDuplicates(true);
  }

  snapshot(): DeviceReport[] {
    return [
      ...[...this.known.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([serial, k]) => this.report(serial, k)),
      ...[...this.external.values()].sort((a, b) => (a.serial < b.serial ? -1 : 1)),
    ];
  }

  private external = new Map<string, DeviceReport>();

  /**
   * Devices another source reports (iOS devices through devicectl): part of
   * every snapshot, and their changes go out as events like adb's.
   */
  setExternal(reports: DeviceReport[]): void {
    const next = new Map(reports.map((r) => [r.serial, r]));
    for (const serial of this.external.keys()) if (!next.has(serial)) this.emit({ kind: "removed", serial });
    for (const r of reports) {
      const old = this.external.get(r.serial);
      if (!old || !equals(DeviceReportSchema, old, r)) this.emit({ kind: "upsert", report: r });
    }
    this.external = next;
  }

  private report(serial: string, k: Known): DeviceReport {
    const properties = k.facts && k.identity ? toDeviceProperties(k.facts, k.identity) : undefined;
    return create(DeviceReportSchema, { serial, state: k.state, ...(properties ? { properties } : {}) });
  }

  private identify(serial: string, facts: DeviceFacts): DeviceIdentity {
    const pinLabel = this.opts.pinFor?.(serial) ?? "";
    return { physicalId: physicalIdOf(facts.props, pinLabel), identityStatus: "ok", pinLabel };
  }

  /**
   * Flags serials that share a physical id but show different boot ids: two
   * phones with one identity. Emits upserts for serials whose flag changed.
   */
  private markDuplicates(emitAll = false): void {
    const list: { serial: string; physicalId: string; bootId: string }[] = [];
    for (const [serial, k] of this.known) {
      if (k.facts && k.identity && k.state === "device") list.push({ serial, physicalId: k.identity.physicalId, bootId: k.facts.bootId });
    }
    const duplicates = findDuplicateIdentities(list);
    for (const [serial, k] of this.known) {
      if (!k.identity) continue;
      const status = duplicates.has(serial) ? "duplicate" : "ok";
      const changed = k.identity.identityStatus !== status;
      if (changed) {
        k.identity = { ...k.identity, identityStatus: status };
        this.opts.onDuplicate?.(serial, k.identity.physicalId, status === "duplicate");
      }
      if (changed || emitAll) this.emit({ kind: "upsert", report: this.report(serial, k) });
    }
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
        this.markUnavailable();
        this.scheduleRetry(err?.message ?? "adb tracking ended");
      });
      tracker.start(this.opts.server);
    } catch (err) {
      this.markUnavailable();
      this.scheduleRetry((err as Error).message);
    }
  }

  private async poll(): Promise<void> {
    if (this.stopped || !this.tracker) return;
    try {
      // adbkit starts a server when it finds none; with starting disabled, look first.
      if (this.opts.serverAvailable && !(await this.opts.serverAvailable())) return;
      const list = await this.opts.adb.listDevices();
      if (!this.stopped && this.tracker) this.reconcile(list.map((d: { id: string; type: string }) => ({ serial: d.id, state: d.type })));
    } catch {
      // Tracking notices a lost server and retries on its own.
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

  /** No adb server: every adb phone is unreachable until a new server lists it again. */
  private markUnavailable(): void {
    for (const serial of [...this.known.keys()]) this.setState(serial, ADB_UNAVAILABLE);
  }

  private setState(serial: string, state: string): void {
    const prev = this.known.get(serial);
    if (prev && prev.state === state) return;
    const k: Known = { state, facts: prev?.facts, identity: prev?.identity, generation: (prev?.generation ?? 0) + 1 };
    this.known.set(serial, k);
    this.cancelPropertyRetry(serial);
    this.emit({ kind: "upsert", report: this.report(serial, k) });
    if (state === "device") void this.loadProperties(serial, k.generation);
  }

  private remove(serial: string): void {
    this.cancelPropertyRetry(serial);
    if (!this.known.delete(serial)) return;
    this.emit({ kind: "removed", serial });
    this.markDuplicates();
  }

  private async loadProperties(serial: string, generation: number): Promise<void> {
    const timeoutMs = this.opts.propertyTimeoutMs ?? 10_000;
    let timer: NodeJS.Timeout | undefined;
    try {
      const facts = await Promise.race([
        readDeviceFacts(this.opts.adb.getDevice(serial)),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
      const k = this.known.get(serial);
      if (!k || k.generation !== generation) return;
      this.cancelPropertyRetry(serial);
      k.facts = facts;
      k.identity = this.identify(serial, facts);
      this.opts.onFacts?.(serial, k.identity.physicalId, facts);
      this.emit({ kind: "upsert", report: this.report(serial, k) });
      this.markDuplicates();
    } catch (err) {
      this.opts.log.warn("could not read device properties", { serial, error: (err as Error).message });
      this.retryProperties(serial, generation);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A failed read is tried again while the phone stays online in the same
   * state; nothing else would read it (adb reports no change), and until then
   * the coordinator cannot tell which physical phone it is.
   */
  private retryProperties(serial: string, generation: number): void {
    const k = this.known.get(serial);
    if (this.stopped || !k || k.generation !== generation || k.state !== "device") return;
    const { initialMs, maxMs } = this.opts.propertyRetry ?? { initialMs: 1_000, maxMs: 30_000 };
    const attempt = (this.propertyRetries.get(serial)?.attempt ?? 0) + 1;
    const delay = Math.min(maxMs, initialMs * 2 ** (attempt - 1));
    clearTimeout(this.propertyRetries.get(serial)?.timer);
    const timer = setTimeout(() => {
      const retry = this.propertyRetries.get(serial);
      if (retry?.timer !== timer) return;
      // Kept (with its attempt count) until the read settles; a success or a state change clears it.
      void this.loadProperties(serial, generation);
    }, delay);
    timer.unref();
    this.propertyRetries.set(serial, { timer, attempt });
  }

  private cancelPropertyRetry(serial: string): void {
    const retry = this.propertyRetries.get(serial);
    if (!retry) return;
    clearTimeout(retry.timer);
    this.propertyRetries.delete(serial);
  }
}
