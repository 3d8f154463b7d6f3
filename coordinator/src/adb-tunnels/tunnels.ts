import { EventEmitter } from "node:events";
import { Errors, farmError } from "@farm/shared/errors";
import type { TunnelLink } from "./tunnel-link.js";
import { partitionPoint, readPage, type Page, type PageRequest } from "../paging.js";

/** Limits on remote adb, per coordinator. */
export interface TunnelLimits {
  /** Open tunnels one user (token) may have. */
  perUser: number;
  /** adb streams open at once in one tunnel. */
  streamsPerTunnel: number;
  /** A tunnel with no stream open for this long closes. */
  idleMs: number;
}

export const DEFAULT_TUNNEL_LIMITS: TunnelLimits = { perUser: 4, streamsPerTunnel: 32, idleMs: 30 * 60_000 };

/** "updated" is told at most this often per tunnel: bytes move in many small chunks. */
export const TUNNEL_UPDATE_MS = 2_000;

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
  /** Set when the agent is attached to another replica, which holds the tunnel on it for as long as this link lasts. */
  link?: TunnelLink;
  /** Closes the tunnel with this reason (set by its OpenTunnel call). */
  close(reason: Error): void;
}

export interface TunnelEvents {
  /** A tunnel opened or closed: listings change. */
  changed: [];
  opened: [tunnel: TunnelEntry];
  /** Its byte counts or open streams changed: at most once per TUNNEL_UPDATE_MS per tunnel, the last change included. */
  updated: [tunnel: TunnelEntry];
  closed: [tunnel: TunnelEntry, reason: Error];
}

/** Who lists tunnels, and which ones they ask for. */
export interface TunnelViewer {
  tokenName: string;
  admin: boolean;
}
export interface TunnelFilter {
  /** Only those on this phone; "" for every phone. */
  physicalId: string;
  /** Only those the viewer may close: their own, or every one for an admin. */
  mine: boolean;
}

/** The open tunnels, by id; limits are checked here before anything opens. */
export class Tunnels {
  readonly events = new EventEmitter<TunnelEvents>();
  private readonly byId = new Map<string, TunnelEntry>();
  /** Per tunnel: when "updated" was last told, and the timer that tells the latest change. */
  private readonly updates = new Map<string, { at: number; timer: NodeJS.Timeout | undefined }>();

  constructor(
    readonly limits: TunnelLimits = DEFAULT_TUNNEL_LIMITS,
    private readonly updateMs = TUNNEL_UPDATE_MS,
  ) {}

  /** Refuses a new tunnel over the owner's limit. */
  checkRoom(owner: string): void {
    const open = this.list().filter((t) => t.owner === owner).length;
    if (open >= this.limits.perUser) {
      throw farmError(Errors.TUNNEL_LIMIT, `you have ${open} remote adb tunnels open, the most one user may (farm adb disconnect to close one)`, "target");
    }
  }

  add(t: TunnelEntry): void {
    this.byId.set(t.tunnelId, t);
    this.events.emit("opened", t);
    this.events.emit("changed");
  }

  /** Forgets a closed tunnel; `reason` is what closed it. */
  remove(tunnelId: string, reason: Error): void {
    const t = this.byId.get(tunnelId);
    if (!t) return;
    this.byId.delete(tunnelId);
    clearTimeout(this.updates.get(tunnelId)?.timer);
    this.updates.delete(tunnelId);
    this.events.emit("closed", t, reason);
    this.events.emit("changed");
  }

  /**
   * A tunnel's counts or streams changed (called for every chunk): tells
   * "updated" now, or once its throttle ends. Free while nobody listens.
   */
  touched(t: TunnelEntry): void {
    if (this.events.listenerCount("updated") === 0 || !this.byId.has(t.tunnelId)) return;
    const u = this.updates.get(t.tunnelId) ?? { at: 0, timer: undefined };
    this.updates.set(t.tunnelId, u);
    if (u.timer) return;
    const tell = () => {
      u.timer = undefined;
      u.at = Date.now();
      if (this.byId.get(t.tunnelId) === t) this.events.emit("updated", t);
    };
    const wait = u.at + this.updateMs - Date.now();
    if (wait <= 0) return tell();
    u.timer = setTimeout(tell, wait);
    u.timer.unref();
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

  /** What ListTunnels shows a viewer: every tunnel (it holds no secret), or with `mine` those the viewer may close. */
  listFor(viewer: TunnelViewer, filter: TunnelFilter): TunnelEntry[] {
    return this.list().filter((t) => (!filter.physicalId || t.physicalId === filter.physicalId) && (!filter.mine || viewer.admin || t.owner === viewer.tokenName));
  }

  /** One page of listFor, oldest first; the key is (opened at, tunnel id). Tunnels are few (per-user limit): sorted per read. */
  listPageFor(viewer: TunnelViewer, filter: TunnelFilter, page: PageRequest): Page<TunnelEntry> {
    // Who is asking is part of the filter with `mine`: a token is not handed from one caller to another's list.
    const scope = { list: "tunnels", filter: { physicalId: filter.physicalId || undefined, mine: filter.mine ? (viewer.admin ? "*" : viewer.tokenName) : undefined } };
    const key = (t: TunnelEntry) => [t.openedAt, t.tunnelId] as const;
    return readPage(page, scope, ["number", "string"] as const, key, (after, limit) => {
      const rows = this.listFor(viewer, filter).sort((a, b) => a.openedAt - b.openedAt || (a.tunnelId < b.tunnelId ? -1 : a.tunnelId > b.tunnelId ? 1 : 0));
      const from = after ? partitionPoint(rows, (t) => t.openedAt < after[0] || (t.openedAt === after[0] && t.tunnelId <= after[1])) : 0;
      return rows.slice(from, from + limit);
    });
  }

  /** Tunnels on a lease, on an agent, or idle too long. */
  where(match: (t: TunnelEntry) => boolean): TunnelEntry[] {
    return this.list().filter(match);
  }
}
