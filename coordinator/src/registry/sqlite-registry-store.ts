import { and, eq } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { agents, deviceClaims, devices } from "../db/schema.js";
import type { AgentRow, ClaimRow, DeviceRow, HeartbeatRow, RegistryStore } from "./registry-store.js";

/** The registry's rows in the coordinator's SQLite database. */
export class SqliteRegistryStore implements RegistryStore {
  constructor(private readonly db: CoordinatorDb) {}

  load(): { agents: AgentRow[]; devices: DeviceRow[]; claims: ClaimRow[] } {
    return {
      agents: this.db.select().from(agents).all(),
      devices: this.db.select().from(devices).all(),
      claims: this.db.select().from(deviceClaims).all(),
    };
  }

  saveAgent(row: AgentRow): void {
    this.db.insert(agents).values(row).onConflictDoUpdate({ target: agents.id, set: row }).run();
  }

  saveHeartbeats(rows: readonly HeartbeatRow[]): void {
    if (rows.length === 0) return;
    this.db.transaction((tx) => {
      for (const r of rows) tx.update(agents).set({ lastHeartbeatAt: r.lastHeartbeatAt }).where(eq(agents.id, r.agentId)).run();
    });
  }

  replaceDevices(agentId: string, rows: readonly DeviceRow[], newClaims: readonly ClaimRow[]): void {
    this.db.transaction((tx) => {
      insertClaims(tx, newClaims);
      tx.delete(devices).where(eq(devices.agentId, agentId)).run();
      for (const row of rows) tx.insert(devices).values(row).run();
    });
  }

  saveDevice(row: DeviceRow, newClaims: readonly ClaimRow[]): void {
    this.db.transaction((tx) => {
      insertClaims(tx, newClaims);
      tx.insert(devices)
        .values(row)
        .onConflictDoUpdate({ target: [devices.agentId, devices.serial], set: row })
        .run();
    });
  }

  deleteDevice(agentId: string, serial: string): void {
    this.db
      .delete(devices)
      .where(and(eq(devices.agentId, agentId), eq(devices.serial, serial)))
      .run();
  }

  saveClaimDecisions(rows: readonly ClaimRow[]): void {
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

  deleteAgent(agentId: string): void {
    this.db.transaction((tx) => {
      tx.delete(devices).where(eq(devices.agentId, agentId)).run();
      tx.delete(agents).where(eq(agents.id, agentId)).run();
      tx.delete(deviceClaims).where(eq(deviceClaims.agentId, agentId)).run();
    });
  }
}

type Tx = Parameters<Parameters<CoordinatorDb["transaction"]>[0]>[0];

function insertClaims(tx: Tx, rows: readonly ClaimRow[]): void {
  // A claim, once made, keeps its status: a repeated report never resets a decision.
  for (const r of rows) tx.insert(deviceClaims).values(r).onConflictDoNothing().run();
}
