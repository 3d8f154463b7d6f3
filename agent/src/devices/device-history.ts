import { desc, eq, sql } from "drizzle-orm";
import type { Logger } from "@farm/shared/log";
import type { AgentDb } from "../db/open-agent-db.js";
import { bootIds, deviceEvents } from "../db/schema.js";

export interface DeviceEventRecord {
  physicalId: string;
  serial: string;
  kind: string;
  detail: string;
  at: number;
}

/** Reboots, duplicate identities and other device events, kept on disk. */
export class DeviceHistory {
  // Prepared once: every ownership status reads it.
  private readonly recentQuery;
  private readonly failureListeners = new Set<(kind: string) => void>();

  constructor(
    private readonly db: AgentDb,
    private readonly onEvent: (e: DeviceEventRecord) => void = () => {},
  ) {
    this.recentQuery = db.select().from(deviceEvents).where(eq(deviceEvents.physicalId, sql.placeholder("physicalId"))).orderBy(desc(deviceEvents.at)).limit(sql.placeholder("limit")).prepare();
  }

  /**
   * Records an event that follows something already done (an abandoned
   * action): a failed write is logged and told to the failure listeners
   * (the agent's metrics), never thrown, so history never changes an outcome.
   */
  recordAfter(e: Omit<DeviceEventRecord, "at">, log: Logger): void {
    try {
      this.record(e);
    } catch (err) {
      log.error("could not write the device history; the outcome stands", { kind: e.kind, physicalId: e.physicalId, error: (err as Error).message });
      for (const fn of this.failureListeners) fn(e.kind);
    }
  }

  /** Calls fn with the kind of every event recordAfter could not write. */
  onRecordFailure(fn: (kind: string) => void): void {
    this.failureListeners.add(fn);
  }

  record(e: Omit<DeviceEventRecord, "at">): DeviceEventRecord {
    const full = { ...e, at: Date.now() };
    this.db.insert(deviceEvents).values(full).run();
    this.onEvent(full);
    return full;
  }

  /**
   * Notes the boot id a device reports; a different one than last time (even
   * across agent restarts) is recorded as a reboot.
   */
  observeBoot(physicalId: string, serial: string, bootId: string): boolean {
    if (!bootId) return false;
    const prev = this.db.select().from(bootIds).where(eq(bootIds.physicalId, physicalId)).get();
    const row = { physicalId, bootId, seenAt: Date.now() };
    this.db.insert(bootIds).values(row).onConflictDoUpdate({ target: bootIds.physicalId, set: row }).run();
    if (!prev || prev.bootId === bootId) return false;
    this.record({ physicalId, serial, kind: "reboot", detail: `boot id ${prev.bootId} -> ${bootId}` });
    return true;
  }

  recent(physicalId: string, limit = 50): DeviceEventRecord[] {
    return this.recentQuery.all({ physicalId, limit });
  }
}
