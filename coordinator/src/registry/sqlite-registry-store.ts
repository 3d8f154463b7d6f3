import { and, eq, inArray, or, sql } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { agents, deviceClaims, devices } from "../db/schema.js";
import type { AgentRow, ClaimRow, DeviceRow, HeartbeatRow, RegistryStore, StoredRegistry } from "./registry-store.js";

/** The registry's rows in the coordinator's SQLite database. */
export class SqliteRegistryStore implements RegistryStore {
  // Prepared once: every flush writes one row per agent that beat (1,000 at a time in a large lab).
  private readonly saveHeartbeat;

  constructor(private readonly db: CoordinatorDb) {
    this.saveHeartbeat = db.update(agents).set({ lastHeartbeatAt: sql`${sql.placeholder("lastHeartbeatAt")}` }).where(eq(agents.id, sql.placeholder("agentId"))).prepare();
  }

  async load(): Promise<StoredRegistry> {
    return {
      agents: this.db.select().from(agents).all(),
      devices: this.db.select().from(devices).all(),
      claims: this.db.select().from(deviceClaims).all(),
    };
  }

  async loadAgent(agentId: string, claimKeys: readonly string[]): Promise<StoredRegistry> {
    return this.db.transaction((tx) => ({
      agents: tx.select().from(agents).where(eq(agents.id, agentId)).all(),
      devices: tx.select().from(devices).where(eq(devices.agentId, agentId)).all(),
      claims: tx
        .select()
        .from(deviceClaims)
        .where(claimKeys.length > 0 ? or(eq(deviceClaims.agentId, agentId), inArray(deviceClaims.key, [...claimKeys])) : eq(deviceClaims.agentId, agentId))
        .all(),
    }));
  }

  async saveAgent(row: AgentRow): Promise<void> {
    this.db.insert(agents).values(row).onConflictDoUpdate({ target: agents.id, set: row }).run();
  }

  async saveHeartbeats(rows: readonly HeartbeatRow[]): Promise<void> {
    if (rows.length === 0) return;
    this.db.transaction((tx) => {
      for (const r of rows) this.saveHeartbeat.run({ agentId: r.agentId, lastHeartbeatAt: r.lastHeartbeatAt });
    });
  }

  async replaceDevices(agentId: string, rows: readonly DeviceRow[], newClaims: readonly ClaimRow[]): Promise<ClaimRow[]> {
    return this.db.transaction((tx) => {
      const pending = insertClaims(tx, newClaims);
      tx.delete(devices).where(eq(devices.agentId, agentId)).run();
      for (const row of rows) tx.insert(devices).values(row).run();
      return pending;
    });
  }

  async saveDevice(row: DeviceRow, newClaims: readonly ClaimRow[]): Promise<ClaimRow[]> {
    return this.db.transaction((tx) => {
      const pending = insertClaims(tx, newClaims);
      tx.insert(devices)
        .values(row)
        .onConflictDoUpdate({ target: [devices.agentId, devices.serial], set: row })
        .run();
      return pending;
    });
  }

  async deleteDevice(agentId: string, serial: string): Promise<void> {
    this.db
      .delete(devices)
      .where(and(eq(devices.agentId, agentId), eq(devices.serial, serial)))
      .run();
  }

  async saveClaimDecisions(rows: readonly ClaimRow[]): Promise<void> {
    if (rows.length === 0) return;
    this.db.transaction((tx) => {
      for (const r of rows) {
        tx.update(deviceClaims)
          .set({ status: r.status, decidedBy: r.decidedBy, decidedAt: r.decidedAt })
          .where(and(eq(deviceClaims.key, r.key), eq(deviceClaims.agentId, r.agentId)))
          .run();
      }
    });
  }

  async deleteAgent(agentId: string): Promise<void> {
    this.db.transaction((tx) => {
      tx.delete(devices).where(eq(devices.agentId, agentId)).run();
      tx.delete(agents).where(eq(agents.id, agentId)).run();
      tx.delete(deviceClaims).where(eq(deviceClaims.agentId, agentId)).run();
    });
  }
}

type Tx = Parameters<Parameters<CoordinatorDb["transaction"]>[0]>[0];

function insertClaims(tx: Tx, rows: readonly ClaimRow[]): ClaimRow[] {
  const pending: ClaimRow[] = [];
  for (const r of rows) {
    // A claim, once made, keeps its status: a repeated report never resets a decision.
    const stored = tx.insert(deviceClaims).values(r).onConflictDoNothing().returning({ key: deviceClaims.key }).get();
    if (stored || r.status !== "owner") continue;
    if (tx.select({ key: deviceClaims.key }).from(deviceClaims).where(and(eq(deviceClaims.key, r.key), eq(deviceClaims.agentId, r.agentId))).get()) continue;
    // Another agent owns the key: this claim waits for an admin.
    const row = { ...r, status: "pending" as const };
    tx.insert(deviceClaims).values(row).onConflictDoNothing().run();
    pending.push(row);
  }
  return pending;
}
