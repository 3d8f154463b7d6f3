import { and, asc, eq, inArray, or, sql } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { agents, deviceClaims, devices } from "../db/pg-schema.js";
import type { AgentRow, ClaimRow, DeviceRow, HeartbeatRow, RegistryStore, StoredRegistry } from "./registry-store.js";

/** The registry's rows in the replicas' PostgreSQL database. */
export class PgRegistryStore implements RegistryStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  async load(): Promise<StoredRegistry> {
    // One snapshot: a device or claim written between two reads cannot show up without its agent.
    // Ordered: PostgreSQL has no insertion order to fall back on, and the registry's first match should not vary by run.
    return this.db.transaction(
      async (tx) => ({
        agents: await tx.select().from(agents).orderBy(asc(agents.id)),
        devices: await tx.select().from(devices).orderBy(asc(devices.agentId), asc(devices.serial)),
        claims: await tx.select().from(deviceClaims).orderBy(asc(deviceClaims.key), asc(deviceClaims.agentId)),
      }),
      { isolationLevel: "repeatable read", accessMode: "read only" },
    );
  }

  async loadAgent(agentId: string, claimKeys: readonly string[]): Promise<StoredRegistry> {
    return this.db.transaction(
      async (tx) => ({
        agents: await tx.select().from(agents).where(eq(agents.id, agentId)),
        devices: await tx.select().from(devices).where(eq(devices.agentId, agentId)).orderBy(asc(devices.serial)),
        claims: await tx
          .select()
          .from(deviceClaims)
          .where(claimKeys.length > 0 ? or(eq(deviceClaims.agentId, agentId), inArray(deviceClaims.key, [...claimKeys])) : eq(deviceClaims.agentId, agentId))
          .orderBy(asc(deviceClaims.key), asc(deviceClaims.agentId)),
      }),
      { isolationLevel: "repeatable read", accessMode: "read only" },
    );
  }

  async saveAgent(row: AgentRow): Promise<void> {
    await this.db.insert(agents).values(row).onConflictDoUpdate({ target: agents.id, set: row });
  }

  async saveHeartbeats(rows: readonly HeartbeatRow[]): Promise<void> {
    if (rows.length === 0) return;
    // One statement for the whole batch (rows passed as one JSON parameter), not one round trip per agent.
    const batch = JSON.stringify(rows.map((r) => ({ id: r.agentId, t: r.lastHeartbeatAt })));
    await this.db.execute(sql`
      UPDATE ${agents} SET ${sql.identifier(agents.lastHeartbeatAt.name)} = v.t
      FROM jsonb_to_recordset(${batch}::jsonb) AS v(id text, t bigint)
      WHERE ${agents.id} = v.id`);
  }

  replaceDevices(agentId: string, rows: readonly DeviceRow[], newClaims: readonly ClaimRow[]): Promise<ClaimRow[]> {
    return this.db.transaction(async (tx) => {
      const pending = await insertClaims(tx, newClaims);
      await tx.delete(devices).where(eq(devices.agentId, agentId));
      if (rows.length > 0) await tx.insert(devices).values([...rows]);
      return pending;
    });
  }

  saveDevice(row: DeviceRow, newClaims: readonly ClaimRow[]): Promise<ClaimRow[]> {
    return this.db.transaction(async (tx) => {
      const pending = await insertClaims(tx, newClaims);
      await tx
        .insert(devices)
        .values(row)
        .onConflictDoUpdate({ target: [devices.agentId, devices.serial], set: row });
      return pending;
    });
  }

  async deleteDevice(agentId: string, serial: string): Promise<void> {
    await this.db.delete(devices).where(and(eq(devices.agentId, agentId), eq(devices.serial, serial)));
  }

  async saveClaimDecisions(rows: readonly ClaimRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.db.transaction(async (tx) => {
      for (const r of rows) {
        await tx
          .update(deviceClaims)
          .set({ status: r.status, decidedBy: r.decidedBy, decidedAt: r.decidedAt })
          .where(and(eq(deviceClaims.key, r.key), eq(deviceClaims.agentId, r.agentId)));
      }
    });
  }

  async deleteAgent(agentId: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.delete(devices).where(eq(devices.agentId, agentId));
      await tx.delete(agents).where(eq(agents.id, agentId));
      await tx.delete(deviceClaims).where(eq(deviceClaims.agentId, agentId));
    });
  }
}

type Tx = Parameters<Parameters<PgCoordinatorDb["transaction"]>[0]>[0];

async function insertClaims(tx: Tx, rows: readonly ClaimRow[]): Promise<ClaimRow[]> {
  const pending: ClaimRow[] = [];
  for (const r of rows) {
    // A claim, once made, keeps its status: a repeated report never resets a decision.
    const [stored] = await tx.insert(deviceClaims).values(r).onConflictDoNothing().returning({ key: deviceClaims.key });
    if (stored || r.status !== "owner") continue;
    const [mine] = await tx.select({ key: deviceClaims.key }).from(deviceClaims).where(and(eq(deviceClaims.key, r.key), eq(deviceClaims.agentId, r.agentId)));
    if (mine) continue;
    // Another agent owns the key (reported through another replica first): this claim waits for an admin.
    const row = { ...r, status: "pending" as const };
    await tx.insert(deviceClaims).values(row).onConflictDoNothing();
    pending.push(row);
  }
  return pending;
}
