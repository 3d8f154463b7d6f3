import { and, eq, inArray, lt } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { agentReplicas, replicas } from "../db/schema.js";
import type { AgentReplicaRow, ReplicaRow, ReplicaStore } from "./replica-store.js";

/** Membership in the SQLite database: one coordinator, listing itself. */
export class SqliteReplicaStore implements ReplicaStore {
  constructor(private readonly db: CoordinatorDb) {}

  async upsert(row: ReplicaRow): Promise<void> {
    this.db.insert(replicas).values(row).onConflictDoUpdate({ target: replicas.id, set: row }).run();
  }

  async heartbeat(id: string, at: number): Promise<boolean> {
    return this.db.update(replicas).set({ heartbeatAt: at }).where(eq(replicas.id, id)).run().changes > 0;
  }

  async list(): Promise<ReplicaRow[]> {
    return this.db.select().from(replicas).all();
  }

  async remove(id: string): Promise<void> {
    this.db.transaction((tx) => {
      tx.delete(agentReplicas).where(eq(agentReplicas.replicaId, id)).run();
      tx.delete(replicas).where(eq(replicas.id, id)).run();
    });
  }

  async expire(before: number): Promise<string[]> {
    return this.db.transaction((tx) => {
      const gone = tx.select({ id: replicas.id }).from(replicas).where(lt(replicas.heartbeatAt, before)).all().map((r) => r.id);
      if (gone.length === 0) return [];
      tx.delete(agentReplicas).where(inArray(agentReplicas.replicaId, gone)).run();
      tx.delete(replicas).where(inArray(replicas.id, gone)).run();
      return gone;
    });
  }

  async setAgentReplica(row: AgentReplicaRow): Promise<void> {
    this.db.insert(agentReplicas).values(row).onConflictDoUpdate({ target: agentReplicas.agentId, set: row }).run();
  }

  async claimAgentReplica(row: AgentReplicaRow): Promise<boolean> {
    return this.db.insert(agentReplicas).values(row).onConflictDoNothing().returning({ agentId: agentReplicas.agentId }).all().length > 0;
  }

  async clearAgentReplica(agentId: string, replicaId: string): Promise<void> {
    this.db.delete(agentReplicas).where(and(eq(agentReplicas.agentId, agentId), eq(agentReplicas.replicaId, replicaId))).run();
  }

  async agentReplica(agentId: string): Promise<AgentReplicaRow | undefined> {
    return this.db.select().from(agentReplicas).where(eq(agentReplicas.agentId, agentId)).get();
  }

  async agentReplicas(): Promise<AgentReplicaRow[]> {
    return this.db.select().from(agentReplicas).all();
  }
}
