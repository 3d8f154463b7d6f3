import { EventEmitter } from "node:events";
import { Errors, farmError } from "@farm/shared/errors";

/** Limits on remote adb, per coordinator. */
export interface TunnelLimits {
  /** Open tunnels one user (token) may have. */
  perUser: number;
  /** adb streams open at once in one tunnel. */
  streamsPerTunnel: number;
  /** A tunnel with no stream open for this long closes. */
  idleMs: number;
}

export const DEFAULT_TUNNEL_LIMITS: TunnelLimits = { perUser: 4, streamsPerTunnel: 64, idleMs: 30 * 60_000 };

/** One open tunnel, as the coordinator keeps it. */
export interface TunnelEntry {
  tunnelId: string;
  owner: string;
  serial: string;
  physicalId: string;
  agentId: string;
  agentName: string;
  leaseId: string;
  actionId: string;
  openedAt: number;
  bytesToDevice: number;
  bytesFromDevice: number;
  /** Ends of the open streams: each cuts its stream with the error. */
  readonly streams: Set<(err: Error) => void>;
  /** Last time a stream opened or closed, or bytes moved. */
  lastActive: number;
  /** Closes the tunnel with this reason (set by its OpenTunnel call). */
  close(reason: Error): void;
}

interface TunnelEvents {
  /** A tunnel opened or closed: listings change. */
  changed: [];
}

/** The open tunnels, by id; limits are checked here before anything opens. */
export class Tunnels {
  readonly events = new EventEmitter<TunnelEvents>();
  private readonly byId = new Map<string, TunnelEntry>();

  constructor(readonly limits: TunnelLimits = DEFAULT_TUNNEL_LIMITS) {}

  /** Refuses a new tunnel over the owner's limit. */
  checkRoom(owner: string): void {
    const open = this.list().filter((t) => t.owner === owner).length;
    if (open >= this.limits.perUser) {
      throw farmError(Errors.TUNNEL_LIMIT, `you have ${open} remote adb tunnels open, the most one user may (farm adb disconnect to close one)`, "target");
    }
  }

  add(t: TunnelEntry): void {
    this.byId.set(t.tunnelId, t);
    this.events.emit("changed");
  }

  remove(tunnelId: string): void {
    if (this.byId.delete(tunnelId)) this.events.emit("changed");
  }

  get(tunnelId: string): TunnelEntry | undefined {
    return this.byId.get(tunnelId);
  }

  /** The caller's own tunnel: anyone else's is not found (its id tells nothing). */
  own(tunnelId: string, owner: string): TunnelEntry {
    const t = this.byId.get(tunnelId);
    if (!t || t.owner !== owner) throw farmError(Errors.TUNNEL_NOT_FOUND, `no open tunnel ${tunnelId} of yours`, "tunnel_id");
    return t;
  }

  list(): TunnelEntry[] {
    return [...this.byId.values()];
  }

  /** Tunnels on a lease, on an agent, or idle too long. */
  where(match: (t: TunnelEntry) => boolean): TunnelEntry[] {
    return this.list().filter(match);
  }
}
