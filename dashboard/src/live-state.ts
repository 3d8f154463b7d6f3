import { Code, ConnectError } from "@connectrpc/connect";
import type { ActivityEntry } from "@farm/shared/gen/farm/v1/activity_service_pb";
import type { EvidenceSummary } from "@farm/shared/gen/farm/v1/evidence_pb";
import type { Lease, LeaseWaiter } from "@farm/shared/gen/farm/v1/lease_pb";
import type { Agent, Device } from "@farm/shared/gen/farm/v1/registry_pb";
import type { VideoSession } from "@farm/shared/gen/farm/v1/video_service_pb";
import type { WatchResponse } from "@farm/shared/gen/farm/v1/watch_service_pb";
import { api } from "./api.js";

export type Topic = "agents" | "devices" | "leases" | "queue" | "labels" | "sessions" | "evidence" | "activity" | "connection";
/** The lists read a page at a time: the first page on load, older ones on request. */
export type PagedTopic = "sessions" | "evidence" | "activity";

/** Rows per page of a paged list. */
const PAGE_SIZE = 200;
const ACTIVITY_KEEP = 500;

/** One physical phone (or a device without identity yet): the key rows are grouped by. */
export function groupKey(d: Device): string {
  return d.properties?.physicalId || `${d.agentId}/${d.serial}`;
}

const deviceKey = (agentId: string, serial: string) => `${agentId}\u0000${serial}`;

/**
 * Everything the dashboard shows, kept current by the coordinator's watch
 * stream: the lists are read once after the stream is ready, then each
 * event changes one entry and tells the views which one, so a view updates
 * a row instead of re-reading a list.
 */
export class LiveState {
  readonly agents = new Map<string, Agent>();
  readonly devices = new Map<string, Device>();
  /** Group key → device keys of its aliases. */
  readonly groups = new Map<string, Set<string>>();
  /** Active leases by physical id. */
  readonly leases = new Map<string, Lease>();
  queue: LeaseWaiter[] = [];
  readonly labels = new Map<string, Record<string, string>>();
  readonly sessions = new Map<string, VideoSession>();
  readonly evidence = new Map<string, EvidenceSummary>();
  /** Newest first. */
  activity: ActivityEntry[] = [];
  /** Token of the next (older) page of each paged list; empty when it is all here. */
  readonly nextPage: Record<PagedTopic, string> = { sessions: "", evidence: "", activity: "" };
  /** Live events trim activity to this many entries; each page read on request raises it. */
  private activityKeep = ACTIVITY_KEEP;
  /** Bumped by each full re-read, so a page asked for before it is dropped. */
  private generation = 0;
  loaded = false;
  connection: "connecting" | "live" | "reconnecting" = "connecting";
  private readonly listeners = new Map<Topic, Set<(key?: string) => void>>();

  on(topic: Topic, fn: (key?: string) => void): () => void {
    const set = this.listeners.get(topic) ?? new Set();
    set.add(fn);
    this.listeners.set(topic, set);
    return () => set.delete(fn);
  }

  private emit(topic: Topic, key?: string): void {
    for (const fn of this.listeners.get(topic) ?? []) fn(key);
  }

  aliases(group: string): Device[] {
    return [...(this.groups.get(group) ?? [])].map((k) => this.devices.get(k)).filter((d): d is Device => d !== undefined);
  }

  /** Runs until the signal aborts, reconnecting (and re-reading) after any break. */
  async run(signal: AbortSignal, onSignedOut: () => void): Promise<void> {
    let delay = 500;
    while (!signal.aborted) {
      try {
        await this.once(signal);
        delay = 500;
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof ConnectError && err.code === Code.Unauthenticated) return onSignedOut();
      }
      this.setConnection("reconnecting");
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10_000);
    }
  }

  private setConnection(c: LiveState["connection"]): void {
    this.connection = c;
    this.emit("connection");
  }

  private async once(signal: AbortSignal): Promise<void> {
    const pending: WatchResponse[] = [];
    let listed = false;
    let failure: unknown;
    for await (const ev of api.watch.watch({}, { signal })) {
      if (ev.kind.case === "ready") {
        // Subscribed: now read the lists; events meanwhile wait their turn.
        this.load().then(
          () => {
            for (const e of pending.splice(0)) this.apply(e);
            listed = true;
            this.loaded = true;
            this.setConnection("live");
            for (const t of ["agents", "devices", "leases", "queue", "labels", "sessions", "evidence", "activity"] as const) this.emit(t);
          },
          (err: unknown) => (failure = err),
        );
        continue;
      }
      if (failure) throw failure;
      if (listed) this.apply(ev);
      else pending.push(ev);
    }
  }

  private async load(): Promise<void> {
    const [agents, devices, leases, labels, sessions, evidence, activity] = await Promise.all([
      api.registry.listAgents({}),
      api.registry.listDevices({}),
      api.leases.listLeases({}),
      api.leases.listDeviceLabels({}),
      api.video.listVideoSessions({ pageSize: PAGE_SIZE }),
      api.evidence.listEvidence({ pageSize: PAGE_SIZE }),
      api.activity.listActivity({ pageSize: PAGE_SIZE }),
    ]);
    this.generation++;
    this.nextPage.sessions = sessions.nextPageToken;
    this.nextPage.evidence = evidence.nextPageToken;
    this.nextPage.activity = activity.nextPageToken;
    this.activityKeep = ACTIVITY_KEEP;
    this.agents.clear();
    for (const a of agents.agents) this.agents.set(a.id, a);
    this.devices.clear();
    this.groups.clear();
    for (const d of devices.devices) this.putDevice(d);
    this.leases.clear();
    for (const l of leases.leases) this.leases.set(l.physicalId, l);
    this.queue = leases.queue;
    this.labels.clear();
    for (const l of labels.devices) this.labels.set(l.physicalId, l.labels);
    this.sessions.clear();
    for (const s of sessions.sessions) this.sessions.set(s.sessionId, s);
    this.evidence.clear();
    for (const e of evidence.bundles) this.evidence.set(e.evidenceId, e);
    this.activity = activity.entries;
  }

  /** Reads the next page of a paged list and adds it; a no-op when there is none. */
  async loadMore(topic: PagedTopic): Promise<void> {
    const pageToken = this.nextPage[topic];
    if (!pageToken) return;
    const generation = this.generation;
    const current = () => generation === this.generation && this.nextPage[topic] === pageToken;
    switch (topic) {
      case "sessions": {
        const res = await api.video.listVideoSessions({ pageSize: PAGE_SIZE, pageToken });
        if (!current()) return;
        // A watch event may have brought a row of this page already; the map keeps the newest copy.
        for (const s of res.sessions) if (!this.sessions.has(s.sessionId)) this.sessions.set(s.sessionId, s);
        this.nextPage.sessions = res.nextPageToken;
        break;
      }
      case "evidence": {
        const res = await api.evidence.listEvidence({ pageSize: PAGE_SIZE, pageToken });
        if (!current()) return;
        for (const e of res.bundles) if (!this.evidence.has(e.evidenceId)) this.evidence.set(e.evidenceId, e);
        this.nextPage.evidence = res.nextPageToken;
        break;
      }
      case "activity": {
        const res = await api.activity.listActivity({ pageSize: PAGE_SIZE, pageToken });
        if (!current()) return;
        this.activity = [...this.activity, ...res.entries];
        this.activityKeep += res.entries.length;
        this.nextPage.activity = res.nextPageToken;
        break;
      }
    }
    this.emit(topic);
  }

  private putDevice(d: Device): string | undefined {
    const key = deviceKey(d.agentId, d.serial);
    const old = this.devices.get(key);
    const oldGroup = old ? groupKey(old) : undefined;
    const group = groupKey(d);
    if (oldGroup !== undefined && oldGroup !== group) this.groups.get(oldGroup)?.delete(key);
    this.devices.set(key, d);
    const set = this.groups.get(group) ?? new Set<string>();
    set.add(key);
    this.groups.set(group, set);
    return oldGroup !== group ? oldGroup : undefined;
  }

  private apply(ev: WatchResponse): void {
    const k = ev.kind;
    switch (k.case) {
      case "device": {
        const moved = this.putDevice(k.value);
        if (moved !== undefined) this.emit("devices", moved);
        return this.emit("devices", groupKey(k.value));
      }
      case "deviceRemoved": {
        const key = deviceKey(k.value.agentId, k.value.serial);
        const old = this.devices.get(key);
        if (!old) return;
        this.devices.delete(key);
        const group = groupKey(old);
        const set = this.groups.get(group);
        set?.delete(key);
        if (set?.size === 0) this.groups.delete(group);
        return this.emit("devices", group);
      }
      case "agent":
        this.agents.set(k.value.id, k.value);
        return this.emit("agents", k.value.id);
      case "lease":
        this.leases.set(k.value.physicalId, k.value);
        return this.emit("leases", k.value.physicalId);
      case "leaseEnded":
        if (this.leases.get(k.value.physicalId)?.leaseId === k.value.leaseId) this.leases.delete(k.value.physicalId);
        return this.emit("leases", k.value.physicalId);
      case "queue":
        this.queue = k.value.waiters;
        return this.emit("queue");
      case "labels":
        this.labels.set(k.value.physicalId, k.value.labels);
        return this.emit("labels", k.value.physicalId);
      case "videoSession":
        this.sessions.set(k.value.sessionId, k.value);
        return this.emit("sessions", k.value.sessionId);
      case "evidence":
        this.evidence.set(k.value.evidenceId, k.value);
        return this.emit("evidence", k.value.evidenceId);
      case "activity":
        this.activity = [k.value, ...this.activity];
        if (this.activity.length > this.activityKeep) {
          this.activity.length = this.activityKeep;
          // The next page's token follows a row just dropped: reading it would skip the rows between.
          this.nextPage.activity = "";
        }
        return this.emit("activity");
      default:
        return;
    }
  }
}
