import { Code, ConnectError } from "@connectrpc/connect";
import type { ActivityEntry } from "@farm/shared/gen/farm/v1/activity_service_pb";
import type { Tunnel } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import type { EvidenceSummary } from "@farm/shared/gen/farm/v1/evidence_pb";
import type { Lease, LeaseWaiter } from "@farm/shared/gen/farm/v1/lease_pb";
import type { Agent, Device } from "@farm/shared/gen/farm/v1/registry_pb";
import { SessionStatus, type Session, type SessionStep } from "@farm/shared/gen/farm/v1/session_service_pb";
import type { VideoSession } from "@farm/shared/gen/farm/v1/video_service_pb";
import type { WatchResponse } from "@farm/shared/gen/farm/v1/watch_service_pb";
import type { Api } from "./api-clients.js";
import type { Me } from "./api.js";

export type Topic = "agents" | "devices" | "leases" | "queue" | "labels" | "sessions" | "testSessions" | "evidence" | "activity" | "tunnels" | "connection";
/** The lists read a page at a time: the first page on load, the next ones on request. */
export type PagedTopic = "sessions" | "testSessions" | "evidence" | "activity" | "agents" | "devices";

/** Rows per page of a paged list, unless told otherwise. */
const PAGE_SIZE = 200;
/** Pages of the lists read to the end: the largest the coordinator serves. */
const FULL_PAGE = 1000;
const ACTIVITY_KEEP = 500;
/** A session's counts are read again this long after a step of it arrives (steps of a burst share one read). */
const STEP_COUNT_DELAY_MS = 250;

/**
 * The newer of two copies of a session: counts only grow and an ended
 * session stays ended, whichever copy (event or read) arrived last.
 */
export function newerSession(old: Session | undefined, next: Session): Session {
  if (!old) return next;
  const ended = old.status !== SessionStatus.RUNNING && next.status === SessionStatus.RUNNING ? { status: old.status, endTime: old.endTime } : {};
  return { ...next, ...ended, stepCount: Math.max(old.stepCount, next.stepCount), failedStepCount: Math.max(old.failedStepCount, next.failedStepCount) };
}

/**
 * The newer of two copies of a tunnel: its byte counts only grow, so a copy
 * with fewer bytes moved is the older one (a read and an event may cross).
 */
export function newerTunnel(old: Tunnel | undefined, next: Tunnel): Tunnel {
  if (!old) return next;
  return next.bytesToDevice + next.bytesFromDevice < old.bytesToDevice + old.bytesFromDevice ? old : next;
}

/** Where a device sits in the coordinator's device list: (agent id, serial). */
type DeviceKey = readonly [agentId: string, serial: string];

/** One physical phone (or a device without identity yet): the key rows are grouped by. */
export function groupKey(d: Device): string {
  return d.properties?.physicalId || `${d.agentId}/${d.serial}`;
}

const deviceKey = (agentId: string, serial: string) => `${agentId}\u0000${serial}`;

/** The coordinator's device order (both sides compare strings by UTF-16 code units). */
function compareKeys(a: DeviceKey, b: DeviceKey): number {
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0;
}

/**
 * Reads a List call to its end by following its tokens: for the lists every
 * device row joins (leases, labels), which must be whole whatever devices
 * are read. Both hold at most one entry per phone.
 */
async function readToEnd<R extends { nextPageToken: string }>(read: (pageToken: string) => Promise<R>): Promise<R[]> {
  const pages = [await read("")];
  const seen = new Set<string>();
  for (let token = pages[0]?.nextPageToken ?? ""; token && !seen.has(token); token = pages[pages.length - 1]?.nextPageToken ?? "") {
    seen.add(token);
    pages.push(await read(token));
  }
  return pages;
}

/**
 * A phone's open tunnels; undefined when they cannot be read (the page
 * still shows those opened from now on), which must not stop the rest.
 */
async function readTunnels(api: Api, physicalId: string): Promise<Tunnel[] | undefined> {
  return api.tunnels.listTunnels({ physicalId }).then(
    (res) => res.tunnels,
    () => undefined,
  );
}

/**
 * Everything the dashboard shows, kept current by the coordinator's watch
 * stream: the lists are read once after the stream is ready, then each
 * event changes one entry and tells the views which one, so a view updates
 * a row instead of re-reading a list.
 *
 * Agents and devices are read a page at a time in the coordinator's order
 * (agent id, then serial): what is held is every row up to the last one
 * read, and an event about a row after it is left for its page, so a page
 * read later neither repeats nor misses a row.
 */
export class LiveState {
  readonly agents = new Map<string, Agent>();
  /** The devices read so far (in the state filter, up to the last page read). */
  readonly devices = new Map<string, Device>();
  /** Group key → device keys of its aliases. */
  readonly groups = new Map<string, Set<string>>();
  /** The coordinator's state filter on the device list; "" for every state. */
  deviceState = "";
  /** Active leases by physical id. */
  readonly leases = new Map<string, Lease>();
  queue: LeaseWaiter[] = [];
  readonly labels = new Map<string, Record<string, string>>();
  readonly sessions = new Map<string, VideoSession>();
  /** Recorded test sessions (SessionService), newest first as read. */
  readonly testSessions = new Map<string, Session>();
  readonly evidence = new Map<string, EvidenceSummary>();
  /** Newest first. */
  activity: ActivityEntry[] = [];
  /** Open remote adb tunnels by id: the followed phone's as read, and any other phone's opened since. */
  readonly tunnels = new Map<string, Tunnel>();
  /** Token of the next (older) page of each paged list; empty when it is all here. */
  readonly nextPage: Record<PagedTopic, string> = { sessions: "", testSessions: "", evidence: "", activity: "", agents: "", devices: "" };
  /** The last agent id read while more agents are on the coordinator: agents after it wait for their page. */
  private agentEdge = "";
  /** The last device read while more devices are. */
  private deviceEdge: DeviceKey = ["", ""];
  /** Agent and device events seen while a page is read: applied again after it, as they may be newer than the page. */
  private replay: WatchResponse[] | undefined;
  private reading = 0;
  /** Bumped by each read of the device list from its start, so a page of the list before it is dropped. */
  private deviceGeneration = 0;
  /** One phone's aliases, read on their own for its page (they may be on no page read yet) and kept live. */
  private followed: { group: string; devices: Map<string, Device>; ready: boolean } | undefined;
  /** Live events trim activity to this many entries; each page read on request raises it. */
  private activityKeep = ACTIVITY_KEEP;
  /** Bumped by each full re-read, so a page asked for before it is dropped. */
  private generation = 0;
  loaded = false;
  connection: "connecting" | "live" | "reconnecting" = "connecting";
  private readonly listeners = new Map<Topic, Set<(key?: string) => void>>();
  private readonly stepListeners = new Set<(step: SessionStep) => void>();
  /** Sessions whose counts are read again soon, after steps of theirs arrived. */
  private readonly countReads = new Map<string, ReturnType<typeof setTimeout>>();

  /** Rows per page of a paged list. */
  private readonly pageSize: number;

  /** `api`: the coordinator's clients; `me`: who is signed in (what the views offer depends on the role); `pageSize`: rows per page (tests use small pages to reach their edges). */
  constructor(
    private readonly api: Api,
    readonly me?: Me,
    options: { pageSize?: number } = {},
  ) {
    this.pageSize = options.pageSize ?? PAGE_SIZE;
  }

  on(topic: Topic, fn: (key?: string) => void): () => void {
    const set = this.listeners.get(topic) ?? new Set();
    set.add(fn);
    this.listeners.set(topic, set);
    return () => set.delete(fn);
  }

  /** Every session step event (appended, or its OCR arrived), as it comes. */
  onStep(fn: (step: SessionStep) => void): () => void {
    this.stepListeners.add(fn);
    return () => this.stepListeners.delete(fn);
  }

  private emit(topic: Topic, key?: string): void {
    for (const fn of this.listeners.get(topic) ?? []) fn(key);
  }

  aliases(group: string): Device[] {
    return [...(this.groups.get(group) ?? [])].map((k) => this.devices.get(k)).filter((d): d is Device => d !== undefined);
  }

  /** Every alias of one phone: as read for its page when it is followed, else those among the devices read. */
  phone(group: string): Device[] {
    const f = this.followed;
    return f?.group === group && f.devices.size > 0 ? [...f.devices.values()] : this.aliases(group);
  }

  /** The open remote adb tunnels on a phone, oldest first. */
  tunnelsOn(physicalId: string): Tunnel[] {
    return [...this.tunnels.values()].filter((t) => t.physicalId === physicalId).sort((a, b) => Number(a.openedAtMs - b.openedAtMs));
  }

  /** Whether the phone's own read is still on its way. */
  phonePending(group: string): boolean {
    return this.followed?.group === group && !this.followed.ready;
  }

  /**
   * Reads every alias of a phone (by physical id, on any agent), and its
   * remote adb tunnels, and keeps them live until the returned function is
   * called: its page shows the phone even when the device list has not read it.
   */
  follow(group: string): () => void {
    const f = { group, devices: new Map<string, Device>(), ready: false };
    this.followed = f;
    if (this.loaded) void this.readFollowed(f);
    return () => {
      if (this.followed === f) this.followed = undefined;
    };
  }

  /** Reads the device list again from its start with another state filter ("" for all). */
  async setDeviceState(deviceState: string): Promise<void> {
    if (deviceState === this.deviceState) return;
    this.deviceState = deviceState;
    if (!this.loaded) return;
    const generation = ++this.deviceGeneration;
    this.beginRead();
    try {
      const res = await this.api.registry.listDevices({ state: deviceState, pageSize: this.pageSize });
      if (generation !== this.deviceGeneration) return;
      this.setDevices(res.devices, res.nextPageToken);
    } finally {
      this.endRead();
    }
    this.emit("devices");
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
    for await (const ev of this.api.watch.watch({}, { signal })) {
      if (ev.kind.case === "ready") {
        // Subscribed: now read the lists; events meanwhile wait their turn.
        const followed = this.followed;
        this.load().then(
          () => {
            for (const e of pending.splice(0)) this.apply(e);
            // A phone followed while the lists were read has not been read yet.
            if (this.followed && this.followed !== followed) void this.readFollowed(this.followed);
            listed = true;
            this.loaded = true;
            this.setConnection("live");
            for (const t of ["agents", "devices", "leases", "queue", "labels", "sessions", "testSessions", "evidence", "activity", "tunnels"] as const) this.emit(t);
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
    const deviceGeneration = ++this.deviceGeneration;
    const followed = this.followed;
    const [agents, devices, leases, labels, sessions, testSessions, evidence, activity, aliases, tunnels] = await Promise.all([
      this.api.registry.listAgents({ pageSize: this.pageSize }),
      this.api.registry.listDevices({ state: this.deviceState, pageSize: this.pageSize }),
      // Whole: every device row shows its phone's lease and labels.
      readToEnd((pageToken) => this.api.leases.listLeases({ pageSize: FULL_PAGE, pageToken })),
      readToEnd((pageToken) => this.api.leases.listDeviceLabels({ pageSize: FULL_PAGE, pageToken })),
      this.api.video.listVideoSessions({ pageSize: this.pageSize }),
      this.api.sessions.listSessions({ pageSize: this.pageSize }),
      this.api.evidence.listEvidence({ pageSize: this.pageSize }),
      this.api.activity.listActivity({ pageSize: this.pageSize }),
      followed ? readToEnd((pageToken) => this.api.registry.listDevices({ physicalId: followed.group, pageSize: FULL_PAGE, pageToken })) : undefined,
      followed ? readTunnels(this.api, followed.group) : undefined,
    ]);
    this.generation++;
    // Events seen before this read are older than it.
    if (this.replay) this.replay = [];
    this.nextPage.sessions = sessions.nextPageToken;
    this.nextPage.testSessions = testSessions.nextPageToken;
    this.nextPage.evidence = evidence.nextPageToken;
    this.nextPage.activity = activity.nextPageToken;
    this.activityKeep = ACTIVITY_KEEP;
    this.agents.clear();
    for (const a of agents.agents) this.agents.set(a.id, a);
    this.nextPage.agents = agents.nextPageToken;
    this.agentEdge = agents.agents[agents.agents.length - 1]?.id ?? "";
    // A filter chosen while this was read reads its own list.
    if (deviceGeneration === this.deviceGeneration) this.setDevices(devices.devices, devices.nextPageToken);
    if (followed && aliases && this.followed === followed) this.setFollowed(followed, aliases.flatMap((p) => p.devices));
    // Tunnels closed while the stream was down sent no event: only a read knows them gone.
    this.tunnels.clear();
    if (followed && tunnels) this.setTunnels(followed.group, tunnels);
    this.leases.clear();
    for (const l of leases.flatMap((p) => p.leases)) this.leases.set(l.physicalId, l);
    // The queue is not paged: it comes whole with the first page.
    this.queue = leases[0]?.queue ?? [];
    this.labels.clear();
    for (const l of labels.flatMap((p) => p.devices)) this.labels.set(l.physicalId, l.labels);
    this.sessions.clear();
    for (const s of sessions.sessions) this.sessions.set(s.sessionId, s);
    this.testSessions.clear();
    for (const s of testSessions.sessions) this.testSessions.set(s.sessionId, s);
    this.evidence.clear();
    for (const e of evidence.bundles) this.evidence.set(e.evidenceId, e);
    this.activity = activity.entries;
  }

  /** Reads the next page of a paged list and adds it; a no-op when there is none. */
  async loadMore(topic: PagedTopic): Promise<void> {
    const pageToken = this.nextPage[topic];
    if (!pageToken) return;
    const generation = this.generation;
    const deviceGeneration = this.deviceGeneration;
    const current = () => generation === this.generation && deviceGeneration === this.deviceGeneration && this.nextPage[topic] === pageToken;
    this.beginRead();
    try {
      if (!(await this.readMore(topic, pageToken, current))) return;
    } finally {
      this.endRead();
    }
    this.emit(topic);
  }

  /** Reads and adds the page after `pageToken`; false when the page is no longer the next one. */
  private async readMore(topic: PagedTopic, pageToken: string, current: () => boolean): Promise<boolean> {
    switch (topic) {
      case "agents": {
        const res = await this.api.registry.listAgents({ pageSize: this.pageSize, pageToken });
        if (!current()) return false;
        for (const a of res.agents) if (!this.agents.has(a.id)) this.agents.set(a.id, a);
        this.agentEdge = res.agents[res.agents.length - 1]?.id ?? this.agentEdge;
        this.nextPage.agents = res.nextPageToken;
        return true;
      }
      case "devices": {
        const res = await this.api.registry.listDevices({ state: this.deviceState, pageSize: this.pageSize, pageToken });
        if (!current()) return false;
        for (const d of res.devices) if (!this.devices.has(deviceKey(d.agentId, d.serial))) this.putDevice(d);
        const last = res.devices[res.devices.length - 1];
        if (last) this.deviceEdge = [last.agentId, last.serial];
        this.nextPage.devices = res.nextPageToken;
        return true;
      }
      case "sessions": {
        const res = await this.api.video.listVideoSessions({ pageSize: this.pageSize, pageToken });
        if (!current()) return false;
        // A watch event may have brought a row of this page already; the map keeps the newest copy.
        for (const s of res.sessions) if (!this.sessions.has(s.sessionId)) this.sessions.set(s.sessionId, s);
        this.nextPage.sessions = res.nextPageToken;
        return true;
      }
      case "testSessions": {
        const res = await this.api.sessions.listSessions({ pageSize: this.pageSize, pageToken });
        if (!current()) return false;
        for (const s of res.sessions) if (!this.testSessions.has(s.sessionId)) this.testSessions.set(s.sessionId, s);
        this.nextPage.testSessions = res.nextPageToken;
        return true;
      }
      case "evidence": {
        const res = await this.api.evidence.listEvidence({ pageSize: this.pageSize, pageToken });
        if (!current()) return false;
        for (const e of res.bundles) if (!this.evidence.has(e.evidenceId)) this.evidence.set(e.evidenceId, e);
        this.nextPage.evidence = res.nextPageToken;
        return true;
      }
      case "activity": {
        const res = await this.api.activity.listActivity({ pageSize: this.pageSize, pageToken });
        if (!current()) return false;
        this.activity = [...this.activity, ...res.entries];
        this.activityKeep += res.entries.length;
        this.nextPage.activity = res.nextPageToken;
        return true;
      }
    }
  }

  /**
   * A step changes its session's counts without a session event: the step
   * count shows at least its sequence at once, and the session is read
   * again shortly for the exact counts (steps may be stored out of order,
   * and only the coordinator knows which failed).
   */
  private countStep(step: SessionStep): void {
    const id = step.sessionId;
    const s = this.testSessions.get(id);
    if (!s) return;
    if (step.sequence > s.stepCount) {
      this.testSessions.set(id, { ...s, stepCount: step.sequence });
      this.emit("testSessions", id);
    }
    if (this.countReads.has(id)) return;
    this.countReads.set(
      id,
      setTimeout(() => {
        this.countReads.delete(id);
        this.api.sessions.getSession({ sessionId: id }).then(
          (res) => {
            if (!res.session || !this.testSessions.has(id)) return;
            this.testSessions.set(id, newerSession(this.testSessions.get(id), res.session));
            this.emit("testSessions", id);
          },
          () => undefined,
        );
      }, STEP_COUNT_DELAY_MS),
    );
  }

  /** Replaces the devices read with a first page of the list. */
  private setDevices(devices: Device[], nextPageToken: string): void {
    this.devices.clear();
    this.groups.clear();
    for (const d of devices) this.putDevice(d);
    this.nextPage.devices = nextPageToken;
    const last = devices[devices.length - 1];
    this.deviceEdge = last ? [last.agentId, last.serial] : ["", ""];
  }

  private async readFollowed(f: NonNullable<LiveState["followed"]>): Promise<void> {
    this.beginRead();
    try {
      const [pages, tunnels] = await Promise.all([readToEnd((pageToken) => this.api.registry.listDevices({ physicalId: f.group, pageSize: FULL_PAGE, pageToken })), readTunnels(this.api, f.group)]);
      if (this.followed === f) this.setFollowed(f, pages.flatMap((p) => p.devices));
      if (this.followed === f && tunnels) this.setTunnels(f.group, tunnels);
    } catch {
      // The page shows what the device list holds; the next full read tries again.
    } finally {
      this.endRead();
    }
    if (this.followed !== f) return;
    this.emit("devices", f.group);
    this.emit("tunnels", f.group);
  }

  /** Replaces a phone's tunnels with a read of them (events during the read are applied again after it). */
  private setTunnels(physicalId: string, tunnels: Tunnel[]): void {
    for (const [id, t] of this.tunnels) if (t.physicalId === physicalId) this.tunnels.delete(id);
    for (const t of tunnels) this.tunnels.set(t.tunnelId, t);
  }

  private setFollowed(f: NonNullable<LiveState["followed"]>, devices: Device[]): void {
    f.devices.clear();
    for (const d of devices) f.devices.set(deviceKey(d.agentId, d.serial), d);
    f.ready = true;
  }

  /** While any page is read, agent, device and tunnel events are kept to be applied again after it. */
  private beginRead(): void {
    this.reading++;
    this.replay ??= [];
  }

  private endRead(): void {
    if (--this.reading > 0) return;
    const events = this.replay ?? [];
    this.replay = undefined;
    // Applying an event twice is harmless: each carries the row as it is now.
    for (const ev of events) this.apply(ev);
  }

  /** Whether the list holds this device: in the state filter, and not after the last device read. */
  private listsDevice(d: Device): boolean {
    if (this.deviceState && d.state !== this.deviceState) return false;
    return this.nextPage.devices === "" || compareKeys([d.agentId, d.serial], this.deviceEdge) <= 0;
  }

  private dropDevice(key: string): void {
    const old = this.devices.get(key);
    if (!old) return;
    this.devices.delete(key);
    const group = groupKey(old);
    const set = this.groups.get(group);
    set?.delete(key);
    if (set?.size === 0) this.groups.delete(group);
    this.emit("devices", group);
  }

  /** Keeps the followed phone's aliases current; true when the event was about one. */
  private followDevice(key: string, d: Device | undefined): boolean {
    const f = this.followed;
    if (!f) return false;
    if (d && groupKey(d) === f.group) {
      f.devices.set(key, d);
      return true;
    }
    return f.devices.delete(key);
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
    if (this.replay && (k.case === "device" || k.case === "deviceRemoved" || k.case === "agent" || k.case === "tunnel" || k.case === "tunnelClosed")) this.replay.push(ev);
    switch (k.case) {
      case "device": {
        const d = k.value;
        const key = deviceKey(d.agentId, d.serial);
        if (this.followDevice(key, d) && this.followed) this.emit("devices", this.followed.group);
        // After the last device read, it waits for its page; out of the filter, it leaves the list.
        if (!this.listsDevice(d)) return this.dropDevice(key);
        const moved = this.putDevice(d);
        if (moved !== undefined) this.emit("devices", moved);
        return this.emit("devices", groupKey(d));
      }
      case "deviceRemoved": {
        const key = deviceKey(k.value.agentId, k.value.serial);
        if (this.followDevice(key, undefined) && this.followed) this.emit("devices", this.followed.group);
        return this.dropDevice(key);
      }
      case "agent":
        // An agent after the last one read waits for its page.
        if (!this.agents.has(k.value.id) && this.nextPage.agents !== "" && k.value.id > this.agentEdge) return;
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
      case "session":
        this.testSessions.set(k.value.sessionId, newerSession(this.testSessions.get(k.value.sessionId), k.value));
        return this.emit("testSessions", k.value.sessionId);
      case "sessionStep":
        for (const fn of this.stepListeners) fn(k.value);
        return this.countStep(k.value);
      case "evidence":
        this.evidence.set(k.value.evidenceId, k.value);
        return this.emit("evidence", k.value.evidenceId);
      case "tunnel":
        this.tunnels.set(k.value.tunnelId, newerTunnel(this.tunnels.get(k.value.tunnelId), k.value));
        return this.emit("tunnels", k.value.physicalId);
      case "tunnelClosed":
        this.tunnels.delete(k.value.tunnelId);
        return this.emit("tunnels", k.value.physicalId);
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
