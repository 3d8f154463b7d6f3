import { and, eq, inArray, lt } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { agentReplicas, replicas } from "../db/pg-schema.js";
import type { AgentReplicaRow, ReplicaRow, ReplicaStore } from "./replica-store.js";

/** Membership in the replicas' PostgreSQL database. */
export class PgReplicaStore implements ReplicaStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  async upsert(row: ReplicaRow): Promise<void> {
    await this.db.insert(replicas).values(row).onConflictDoUpdate({ target: replicas.id, set: row });
  }

  async heartbeat(id: string, at: number): Promise<boolean> {
    const rows = await this.db.update(replicas).set({ heartbeatAt: at }).where(eq(replicas.id, id)).returning({ id: replicas.id });
    return rows.length > 0;
  }

  list(): Promise<ReplicaRow[]> {
    return this.db.select().from(replicas);
  }

  async remove(id: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.delete(agentReplicas).where(eq(agentReplicas.replicaId, id));
      await tx.delete(replicas).where(eq(replicas.id, id));
    });
  }

  expire(before: number): Promise<string[]> {
    return this.db.transaction(async (tx) => {
      const gone = (await tx.delete(replicas).where(lt(replicas.heartbeatAt, before)).returning({ id: replicas.id })).map((r) => r.id);
      if (gone.length > 0) await tx.delete(agentReplicas).where(inArray(agentReplicas.replicaId, gone));
      return gone;
    });
  }

  async setAgentReplica(row: AgentReplicaRow): Promise<void> {
    await this.db.insert(agentReplicas).values(row).onConflictDoUpdate({ target: agentReplicas.agentId, set: row });
  }

  async claimAgentReplica(row: AgentReplicaRow): Promise<boolean> {
    return (await this.db.insert(agentReplicas).values(row).onConflictDoNothing().returning({ agentId: agentReplicas.agentId })).length > 0;
  }

  async clearAgentReplica(agentId: string, replicaId: string): Promise<void> {
    await this.db.delete(agentReplicas).where(and(eq(agentReplicas.agentId, agentId), eq(agentReplicas.replicaId, replicaId)));
  }

  async agentReplica(agentId: string): Promise<AgentReplicaRow | undefined> {
    const [row] = await this.db.select().from(agentReplicas).where(eq(agentReplicas.agentId, agentId)).limit(1);
    return row;
  }

  agentReplicas(): Promise<AgentReplicaRow[]> {
    return this.db.select().from(agentReplicas);
  }
}
