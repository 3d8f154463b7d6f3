/** A coordinator replica as stored: where it answers, how it proves itself, when it was last heard from. */
export interface ReplicaRow {
  id: string;
  url: string;
  /** sha256 of its secret; the secret itself lives only in its process. */
  secretHash: string;
  startedAt: number;
  heartbeatAt: number;
}

/** Which replica holds an agent's control stream, and the agent token that stream authenticated with. */
export interface AgentReplicaRow {
  agentId: string;
  replicaId: string;
  tokenName: string;
  since: number;
}

/** Replica membership and agents' replicas in the shared database. Each method is one atomic write or read. */
export interface ReplicaStore {
  upsert(row: ReplicaRow): Promise<void>;
  /** Records a heartbeat; false when the row is gone (another replica expired this one). */
  heartbeat(id: string, at: number): Promise<boolean>;
  list(): Promise<ReplicaRow[]>;
  remove(id: string): Promise<void>;
  /** Replicas not heard from since `before`, removed with their agents' rows; returns their ids. */
  expire(before: number): Promise<string[]>;
  setAgentReplica(row: AgentReplicaRow): Promise<void>;
  /** Records the agent's replica only if no replica is recorded for it; true when recorded. */
  claimAgentReplica(row: AgentReplicaRow): Promise<boolean>;
  /** Forgets the agent's replica if it is still `replicaId` (a newer attach elsewhere stays). */
  clearAgentReplica(agentId: string, replicaId: string): Promise<void>;
  agentReplica(agentId: string): Promise<AgentReplicaRow | undefined>;
  agentReplicas(): Promise<AgentReplicaRow[]>;
}
