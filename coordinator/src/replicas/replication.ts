import type { Logger } from "@farm/shared/log";
import type { FarmDatabase } from "../db/database.js";
import type { DeviceLabels } from "../devices/device-labels.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { LeaseRow } from "../leases/lease-store.js";
import type { AgentSession, Registry } from "../registry/registry.js";
import type { ChangeBus } from "./change-bus.js";
import { Membership } from "./membership.js";
import { PgChangeBus } from "./pg-change-bus.js";
import { RemoteAgentSession } from "./remote-agent-session.js";
import { ReplicaClients } from "./replica-clients.js";
import { type ReplicaStore } from "./replica-store.js";
import { createReplicaStore } from "../db/stores.js";

/** This coordinator among its replicas: membership, change notices, the way to the others' agents. */
export interface Replication {
  /** This replica's id. */
  readonly id: string;
  readonly membership: Membership;
  readonly bus: ChangeBus;
  /** Leaves the membership (other replicas hear at once that this one's agents are no longer held here) and stops listening. */
  close(): Promise<void>;
}

export interface ReplicationOptions {
  database: FarmDatabase;
  /** The PostgreSQL URL, for the connection that listens for change notices. */
  databaseUrl: string;
  /** Where other replicas reach this one. */
  url: string;
  registry: Registry;
  leases: LeaseManager;
  labels: DeviceLabels;
  log: Logger;
}

/**
 * Joins the replicas sharing a PostgreSQL database and keeps this one's
 * registry in step with theirs: an agent attached to another replica is
 * listed as online here and reached through that replica; one whose
 * replica is gone is offline until it attaches again, to any replica.
 */
export async function startReplication(opts: ReplicationOptions): Promise<Replication> {
  const { registry, leases, labels, log } = opts;
  if (opts.database.dialect !== "postgres") throw new Error("replicas share a PostgreSQL database");
  const store = createReplicaStore(opts.database);
  const membership = await Membership.join(store, { url: opts.url, log });
  // FARM_CHANGE_NOTICES=single: one notice per change, sent at once, as before coalescing (to compare the two in one run).
  const bus = await PgChangeBus.open(opts.databaseUrl, opts.database.pool, membership.id, log, { coalesce: process.env["FARM_CHANGE_NOTICES"] !== "single" });
  // FARM_REPLICA_LINKS=off: forwarded calls by unary CallAgent, as before links (to compare the two in one run).
  const clients = new ReplicaClients(membership, { links: process.env["FARM_REPLICA_LINKS"] !== "off" });

  const remoteOf = async (agentId: string): Promise<AgentSession | undefined> => {
    const row = await store.agentReplica(agentId);
    if (!row || row.replicaId === membership.id || !membership.isLive(row.replicaId)) return undefined;
    return new RemoteAgentSession(agentId, row.replicaId, row.tokenName, clients);
  };
  const refresh = async (agentId: string) => registry.refreshAgent(agentId, await remoteOf(agentId));
  const failed = (what: string, agentId: string) => (err: unknown) => log.error(`replicas: ${what} failed`, { agentId, error: (err as Error).message });

  // Ours: tell the others (after the change is stored).
  registry.events.on("stored", (agentId, what) => {
    const work = async () => {
      if (what === "attached") {
        await store.setAgentReplica({ agentId, replicaId: membership.id, tokenName: tokenNameOf(registry.agentSession(agentId)?.session), since: Date.now() });
      } else if (what === "detached" || what === "removed") {
        await store.clearAgentReplica(agentId, membership.id);
      }
      await bus.publish("agent", agentId);
    };
    work().catch(failed(`telling other replicas about agent ${what}`, agentId));
  });
  labels.events.on("stored", (physicalId) => void bus.publish("labels", physicalId).catch(failed("telling other replicas about labels", physicalId)));
  // Leases: every change in turn under the farm-wide lock, on what is stored.
  leases.share({ replicaId: membership.id, isLive: (id) => membership.isLive(id), publish: (kind, id, row) => bus.publish(kind, id, row) });
  // Theirs: re-read.
  bus.events.on("change", (c) => {
    if (c.kind === "agent") refresh(c.id).catch(failed("re-reading an agent another replica changed", c.id));
    else if (c.kind === "labels") labels.refresh(c.id).catch(failed("re-reading labels another replica changed", c.id));
    else if (c.kind === "lease") {
      // The row as committed: applied without a read. A notice without one (an older replica) re-reads.
      const row = leaseRowOf(c.data);
      leases.kick(row && row.leaseId === c.id ? leases.applyNotice(row) : leases.refresh());
    } else if (c.kind === "queue") leases.kick(leases.refresh());
  });
  const resync = async () => {
    // Every agent known here or held by any replica, each once.
    const ids = new Set([...(await store.agentReplicas()).map((r) => r.agentId), ...registry.listAgents().map((a) => a.id)]);
    for (const agentId of ids) await refresh(agentId);
  };
  bus.events.on("resync", () => {
    resync().catch(failed("re-reading every agent", "*"));
    leases.kick(leases.refresh());
  });
  membership.events.on("rejoined", () => {
    // Expired while alive: the others dropped this replica's agents. Those still attached here are ours again, unless they attached elsewhere meanwhile.
    const work = async () => {
      const ours = registry.localAgents().map((agentId) => ({ agentId, tokenName: tokenNameOf(registry.agentSession(agentId)?.session) }));
      for (const agentId of await reclaimAgents(store, membership.id, ours)) await bus.publish("agent", agentId);
    };
    work().catch(failed("taking back this replica's agents after it was expired", "*"));
  });
  membership.events.on("gone", (replicaId) => {
    const dropped = registry.dropReplica(replicaId);
    if (dropped.length > 0) log.warn("agents offline: their coordinator replica is gone", { replicaId, agents: dropped.length });
    // Its callers' places wait for them to ask again through another replica.
    leases.kick(leases.refresh());
  });
  // Agents other replicas hold now.
  for (const row of await store.agentReplicas()) if (row.replicaId !== membership.id) await refresh(row.agentId);

  return {
    id: membership.id,
    membership,
    bus,
    async close() {
      const ours = registry.localAgents();
      await membership.leave();
      clients.closeLinks();
      for (const agentId of ours) await bus.publish("agent", agentId).catch(failed("telling other replicas this one is leaving", agentId));
      await bus.close();
    },
  };
}

/** A lease row as a notice carries it, checked field by field; undefined when it is not one. */
export function leaseRowOf(data: unknown): LeaseRow | undefined {
  if (typeof data !== "object" || data === null) return undefined;
  const d = data as Record<string, unknown>;
  const str = (k: string) => typeof d[k] === "string" && (d[k] as string).length <= 512;
  const num = (k: string) => typeof d[k] === "number" && Number.isFinite(d[k]);
  if (!["leaseId", "tokenHash", "holder", "physicalId", "agentId", "serial"].every(str)) return undefined;
  if (!["acquiredAt", "expiresAt", "ttlMs"].every(num)) return undefined;
  if (d["state"] !== "active" && d["state"] !== "released" && d["state"] !== "expired") return undefined;
  if (d["endedAt"] !== null && !num("endedAt")) return undefined;
  return {
    leaseId: d["leaseId"] as string,
    tokenHash: d["tokenHash"] as string,
    holder: d["holder"] as string,
    physicalId: d["physicalId"] as string,
    agentId: d["agentId"] as string,
    serial: d["serial"] as string,
    acquiredAt: d["acquiredAt"] as number,
    expiresAt: d["expiresAt"] as number,
    ttlMs: d["ttlMs"] as number,
    state: d["state"],
    endedAt: d["endedAt"] as number | null,
  };
}

/** The agent token a stream held here authenticated with ("" when unknown). */
function tokenNameOf(session: AgentSession | null | undefined): string {
  return session && "tokenName" in session ? String(session.tokenName) : "";
}

/**
 * Records this replica as holding each agent no replica is recorded for
 * (an agent that attached elsewhere meanwhile stays there); returns those
 * it took back, for the others to re-read.
 */
export async function reclaimAgents(store: ReplicaStore, replicaId: string, agents: readonly { agentId: string; tokenName: string }[]): Promise<string[]> {
  const taken: string[] = [];
  for (const a of agents) if (await store.claimAgentReplica({ ...a, replicaId, since: Date.now() })) taken.push(a.agentId);
  return taken;
}
