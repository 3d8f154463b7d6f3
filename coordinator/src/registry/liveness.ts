import { Errors, farmError } from "@farm/shared/errors";
import type { RegistryStore } from "./registry-store.js";

/** An agent's heartbeat time is re-announced to watchers at most this often. */
export const HEARTBEAT_EVENT_MS = 15_000;

/** What liveness reads of an agent. */
export interface LiveAgent {
  readonly id: string;
  readonly heartbeatIntervalMs: number;
  readonly lastHeartbeatAt: number | null;
  /**
   * Writes of this agent's reports still running (or queued) here: its next
   * messages, heartbeats included, wait unread on its stream meanwhile.
   */
  readonly writing?: number;
  /** When the last of those writes ended: the agent's silence counts from then at the earliest. */
  readonly writtenAt?: number;
}

/**
 * Heartbeats of attached agents. Times are kept in memory and written in
 * batches: they are frequent, and losing one is harmless. An agent that
 * missed `misses` intervals is overdue; the registry ends its session.
 */
export class Liveness {
  private readonly dirty = new Set<string>();
  private readonly announcedAt = new Map<string, number>();
  /**
   * No agent counted here is overdue before this time: a heartbeat only
   * moves a deadline later, so until then a sweep has nothing to end and
   * skips reading every agent (four times a second, at 1,000 agents).
   */
  private earliestDeadline = Infinity;

  constructor(
    private readonly store: Pick<RegistryStore, "saveHeartbeats">,
    private readonly misses: number,
  ) {}

  /** Notes a heartbeat (already set on the agent) for the next flush; true when watchers are due to hear of it. */
  beat(agent: LiveAgent): boolean {
    this.dirty.add(agent.id);
    return (agent.lastHeartbeatAt ?? 0) - (this.announcedAt.get(agent.id) ?? 0) >= HEARTBEAT_EVENT_MS;
  }

  /** Watchers were just told this agent's heartbeat time. */
  announced(agent: LiveAgent): void {
    this.announcedAt.set(agent.id, agent.lastHeartbeatAt ?? 0);
  }

  /** Counts this agent's deadline (it attached, or was read again): the next sweep looks at every agent if it comes first. */
  track(agent: LiveAgent): void {
    const deadline = deadlineOf(agent, this.misses);
    if (deadline !== undefined) this.earliestDeadline = Math.min(this.earliestDeadline, deadline);
  }

  /**
   * False while no agent can be overdue at `now`. True starts a new count:
   * the sweep then passes every agent it keeps to overdue() or track().
   */
  sweepDue(now: number): boolean {
    if (now <= this.earliestDeadline) return false;
    this.earliestDeadline = Infinity;
    return true;
  }

  /** The error that ends an overdue agent's session, or undefined while it is in time (exactly at the deadline it still is). */
  overdue(agent: LiveAgent, now: number): Error | undefined {
    const deadline = deadlineOf(agent, this.misses);
    if (deadline === undefined || agent.lastHeartbeatAt === null || now <= deadline) return undefined;
    return farmError(
      Errors.AGENT_HEARTBEAT_MISSED,
      `no heartbeat for ${now - agent.lastHeartbeatAt} ms (${this.misses} intervals of ${agent.heartbeatIntervalMs} ms)`,
    );
  }

  /** Writes these agents' heartbeat times now (their sessions ended), instead of with the next batch. */
  async persist(agentIds: readonly string[], current: (agentId: string) => LiveAgent | undefined): Promise<void> {
    for (const id of agentIds) this.dirty.delete(id);
    await this.write(agentIds, current);
  }

  /** Writes the batched heartbeat times of the agents `current` still knows. */
  async flush(current: (agentId: string) => LiveAgent | undefined): Promise<void> {
    if (this.dirty.size === 0) return;
    const ids = [...this.dirty];
    this.dirty.clear();
    await this.write(ids, current);
  }

  private async write(ids: readonly string[], current: (agentId: string) => LiveAgent | undefined): Promise<void> {
    const rows = ids.flatMap((id) => {
      const a = current(id);
      return a ? [{ agentId: id, lastHeartbeatAt: a.lastHeartbeatAt }] : [];
    });
    if (rows.length === 0) return;
    try {
      await this.store.saveHeartbeats(rows);
    } catch (err) {
      // Not written: the next flush tries again.
      for (const r of rows) this.dirty.add(r.agentId);
      throw err;
    }
  }

  forget(agentId: string): void {
    this.dirty.delete(agentId);
    this.announcedAt.delete(agentId);
  }
}

/**
 * When an agent that stays silent becomes overdue: `misses` intervals after
 * its last heartbeat, or after this coordinator last finished writing its
 * reports, whichever is later. While such a write runs, none: the agent's
 * messages wait unread behind it (on replicas, behind other agents' writes
 * queued for the database), and this coordinator's own slowness must not
 * end a live agent's session. Undefined also before its first heartbeat.
 */
function deadlineOf(agent: LiveAgent, misses: number): number | undefined {
  if (agent.lastHeartbeatAt === null || (agent.writing ?? 0) > 0) return undefined;
  return Math.max(agent.lastHeartbeatAt, agent.writtenAt ?? 0) + agent.heartbeatIntervalMs * misses;
}
