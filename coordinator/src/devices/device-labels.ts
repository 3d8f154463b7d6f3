import { EventEmitter } from "node:events";
import { invalidArgument } from "@farm/shared/errors";
import { partitionPoint, readPage, type Page, type PageRequest } from "../paging.js";
import type { DeviceLabelStore, LabelRow } from "./device-label-store.js";

export interface DeviceLabelEvents {
  /** A device's labels changed: all of them now. */
  changed: [physicalId: string, labels: Record<string, string>];
  /** This replica stored a change to the device's labels (other replicas re-read them). */
  stored: [physicalId: string];
}

const labelKey = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$/;

export function validateLabelPair(k: string, v: string): void {
  if (!labelKey.test(k)) throw invalidArgument("label", `label key "${k}" must be 1-63 of A-Z a-z 0-9 . _ / - starting with a letter or digit`);
  if (v.length > 255 || /[\n\0]/.test(v)) throw invalidArgument("label", `label value for "${k}" must be one line of at most 255 characters`);
}

/**
 * key=value labels on physical devices (all serials of a phone share them),
 * which lease selectors match. Read from memory, written through to the
 * store. Who may change them is the caller's rule (the lease holder's).
 */
export class DeviceLabels {
  readonly events = new EventEmitter<DeviceLabelEvents>();
  private readonly byDevice = new Map<string, Map<string, string>>();
  /** Keys of `byDevice` in order, for paged listing; dropped when a device is added. */
  private sortedIds: string[] | undefined;

  private constructor(
    private readonly store: DeviceLabelStore,
    rows: readonly LabelRow[],
  ) {
    for (const row of rows) this.labelsFor(row.physicalId).set(row.key, row.value);
  }

  /** Reads every label once; from then on reads come from memory. */
  static async open(store: DeviceLabelStore): Promise<DeviceLabels> {
    return new DeviceLabels(store, await store.all());
  }

  of(physicalId: string): Record<string, string> {
    return Object.fromEntries(this.byDevice.get(physicalId) ?? []);
  }

  /** Whether the device has every one of these labels. */
  matches(physicalId: string, wanted: Record<string, string>): boolean {
    const entries = Object.entries(wanted);
    if (entries.length === 0) return true;
    const labels = this.byDevice.get(physicalId);
    return entries.every(([k, v]) => labels?.get(k) === v);
  }

  /** Labels of every labelled physical device. */
  all(): { physicalId: string; labels: Record<string, string> }[] {
    return [...this.byDevice.entries()].filter(([, m]) => m.size > 0).map(([physicalId, m]) => ({ physicalId, labels: Object.fromEntries(m) }));
  }

  /**
   * One page of labelled devices by physical id (unique and unchanging), so
   * devices labelled between two pages neither repeat nor push others out.
   */
  listPage(page: PageRequest): Page<{ physicalId: string; labels: Record<string, string> }> {
    return readPage(page, { list: "device-labels" }, ["string"] as const, (r: { physicalId: string }) => [r.physicalId] as const, (after, limit) => {
      const ids = (this.sortedIds ??= [...this.byDevice.keys()].sort());
      const out: { physicalId: string; labels: Record<string, string> }[] = [];
      // A device whose last label was removed keeps its (empty) entry: skipped, as in all().
      for (let i = after ? partitionPoint(ids, (id) => id <= after[0]) : 0; i < ids.length && out.length < limit; i++) {
        const m = this.byDevice.get(ids[i] as string);
        if (m && m.size > 0) out.push({ physicalId: ids[i] as string, labels: Object.fromEntries(m) });
      }
      return out;
    });
  }

  /** Sets these labels (others stay); all are checked before any is stored. Returns the device's labels now. */
  async set(physicalId: string, labels: Record<string, string>): Promise<Record<string, string>> {
    const pairs = Object.entries(labels);
    for (const [k, v] of pairs) validateLabelPair(k, v);
    // Stored first: memory never shows a label the store does not have.
    await this.store.upsert(pairs.map(([key, value]) => ({ physicalId, key, value })));
    const m = this.labelsFor(physicalId);
    for (const [k, v] of pairs) m.set(k, v);
    this.events.emit("stored", physicalId);
    return this.changed(physicalId);
  }

  /** Removes one label. Returns the device's labels now. */
  async remove(physicalId: string, key: string): Promise<Record<string, string>> {
    await this.store.delete(physicalId, key);
    this.byDevice.get(physicalId)?.delete(key);
    this.events.emit("stored", physicalId);
    return this.changed(physicalId);
  }

  /** Another replica changed this device's labels: re-reads them. */
  async refresh(physicalId: string): Promise<void> {
    const rows = await this.store.of(physicalId);
    const m = this.labelsFor(physicalId);
    m.clear();
    for (const r of rows) m.set(r.key, r.value);
    this.changed(physicalId);
  }

  private changed(physicalId: string): Record<string, string> {
    const now = this.of(physicalId);
    this.events.emit("changed", physicalId, now);
    return now;
  }

  private labelsFor(physicalId: string): Map<string, string> {
    let m = this.byDevice.get(physicalId);
    if (!m) {
      this.byDevice.set(physicalId, m = new Map());
      this.sortedIds = undefined;
    }
    return m;
  }
}
