import type { JsonValue } from "@bufbuild/protobuf";

/** An agent as stored: what it said at its last attach, and when it was last heard from. */
export interface AgentRow {
  id: string;
  name: string;
  hostname: string;
  agentVersion: string;
  protocolVersion: number;
  adbVersion: string;
  heartbeatIntervalMs: number;
  connectedAt: number | null;
  lastHeartbeatAt: number | null;
}

/** One adb serial an agent reports, as stored. */
export interface DeviceRow {
  agentId: string;
  serial: string;
  /** adb's state as the agent reported it (device, offline, unauthorized, ...). */
  state: string;
  /** DeviceProperties in protobuf JSON: every field, so one added later survives a restart without a store change. */
  properties: JsonValue;
  updatedAt: number;
}

export type ClaimStatus = "owner" | "pending" | "accepted" | "rejected";

/** An agent's claim on a key ("physical:<id>" or "serial:<adb serial>"). */
export interface ClaimRow {
  key: string;
  agentId: string;
  status: ClaimStatus;
  createdAt: number;
  decidedBy: string | null;
  decidedAt: number | null;
}

export interface HeartbeatRow {
  agentId: string;
  lastHeartbeatAt: number | null;
}

/** Everything the store holds, as the registry reads it at start. */
export interface StoredRegistry {
  agents: AgentRow[];
  devices: DeviceRow[];
  claims: ClaimRow[];
}

/**
 * Where the registry keeps agents, their devices and their claims. The
 * registry serves reads from memory and reads the store once, at start;
 * every other method here is one atomic write.
 */
export interface RegistryStore {
  load(): Promise<StoredRegistry>;
  /** One agent as stored now (no agent: removed), its devices, and every claim on the keys in `claimKeys` or by the agent. */
  loadAgent(agentId: string, claimKeys: readonly string[]): Promise<StoredRegistry>;
  /** Inserts or replaces the agent row. */
  saveAgent(row: AgentRow): Promise<void>;
  saveHeartbeats(rows: readonly HeartbeatRow[]): Promise<void>;
  /**
   * Replaces every device of the agent and adds the claims those devices
   * make (an existing claim is kept as is). An owner claim on a key another
   * agent already owns (stored through another replica) is stored pending
   * instead: those are returned.
   */
  replaceDevices(agentId: string, devices: readonly DeviceRow[], newClaims: readonly ClaimRow[]): Promise<ClaimRow[]>;
  /** Inserts or replaces one device, with the claims it makes (returned: those stored pending, as for replaceDevices). */
  saveDevice(row: DeviceRow, newClaims: readonly ClaimRow[]): Promise<ClaimRow[]>;
  deleteDevice(agentId: string, serial: string): Promise<void>;
  /** Stores decisions on existing claims (status, decidedBy, decidedAt). */
  saveClaimDecisions(rows: readonly ClaimRow[]): Promise<void>;
  /** Forgets the agent, its devices and its claims. */
  deleteAgent(agentId: string): Promise<void>;
}
