import { Code } from "@connectrpc/connect";
import { eq, and } from "drizzle-orm";
import { create, fromJsonString, toBinary, toJsonString } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { actionError, ErrorCodes, farmError } from "@farm/shared/errors";
import {
  AgentSchema,
  DevicePropertiesSchema,
  DeviceSchema,
  type Agent,
  type Device,
  type DeviceProperties,
} from "@farm/shared/gen/farm/v1/registry_pb";
import type { AgentHello, DeviceReport } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { CoordinatorDb } from "./db/open-database.js";
import { agents, devices } from "./db/schema.js";

/** State shown for devices whose agent is not attached. */
export const AGENT_OFFLINE = "agent-offline";

/** The live control stream of an attached agent, as the registry sees it. */
export interface AgentSession {
  /** Ends the stream with this error (the agent will reconnect). */
  terminate(err: Error): void;
}

/** Where a command for a serial goes: exactly one agent, never an alias. */
export interface Route<S extends AgentSession = AgentSession> {
  agentId: string;
  agentName: string;
  serial: string;
  /** Empty until the agent has read the device's identity. */
  physicalId: string;
  identityStatus: string;
  session: S;
}

/** An online serial that leases can be granted through. */
export interface Candidate {
  physicalId: string;
  agentId: string;
  agentName: string;
  serial: string;
  model: string;
  apiLevel: number;
}

interface DeviceEntry {
  serial: string;
  state: string;
  properties: DeviceProperties;
  updatedAt: number;
  /** Encoded Device as last listed, and the state/agent it was encoded for. */
  wire?: { key: string; bytes: Uint8Array };
}

interface AgentEntry {
  id: string;
  name: string;
  hostname: string;
  agentVersion: string;
  protocolVersion: number;
  adbVersion: string;
  heartbeatIntervalMs: number;
  connectedAt: number | null;
  lastHeartbeatAt: number | null;
  session: AgentSession | null;
  devices: Map<string, DeviceEntry>;
  /** Set while the agent drains; cleared when it attaches again without draining. */
  drainReason: string;
  /** How its current or last control stream arrived. */
  transport: string;
}

/** What changed, for live watchers (dashboards). */
export type RegistryEvent =
  | { kind: "device"; device: Device }
  | { kind: "deviceRemoved"; agentId: string; serial: string }
  | { kind: "agent"; agent: Agent };

/** An agent's heartbeat time is re-announced to watchers at most this often. */
const HEARTBEAT_EVENT_MS = 15_000;

export interface DeviceFilter {
  agent?: string;
  state?: string;
}

/**
 * Agents and their devices. Reads are served from memory; every change is
 * written through to SQLite so a restarted coordinator still lists what it
 * knew (as agent-offline) until agents re-attach. Heartbeats stay in memory
 * and are flushed in batches: they are frequent and losing one is harmless.
 */
export class Registry {
  private readonly agents = new Map<string, AgentEntry>();
  private readonly dirtyHeartbeats = new Set<string>();
  private readonly heartbeatAnnounced = new Map<string, number>();
  /** Receives every change watchers should see; set by the coordinator. */
  onEvent: ((e: RegistryEvent) => void) | undefined;
  /** Whether anyone watches now: without watchers, no event is built (attach and heartbeats are hot paths). */
  watched: () => boolean = () => this.onEvent !== undefined;

  constructor(
    private readonly db: CoordinatorDb,
    private readonly opts: { heartbeatMisses: number; now?: () => number },
  ) {
    this.load();
  }

  private now(): number {
    return this.opts.now?.() ?? Date.now();
  }

  private load(): void {
    for (const row of this.db.select().from(agents).all()) {
      this.agents.set(row.id, { ...row, session: null, devices: new Map(), drainReason: "", transport: "" });
    }
    for (const row of this.db.select().from(devices).all()) {
      const agent = this.agents.get(row.agentId);
      if (!agent) continue;
      agent.devices.set(row.serial, {
        serial: row.serial,
        state: row.state,
        properties: parseProperties(row.properties),
        updatedAt: row.updatedAt,
      });
    }
  }

  /** Registers an attached agent; refuses a second stream for the same id. */
  attach(hello: AgentHello, session: AgentSession, transport = ""): void {
    const existing = this.agents.get(hello.agentId);
    if (existing?.session) {
      throw farmError(
        Code.AlreadyExists,
        ErrorCodes.agentAlreadyAttached,
        `agent ${hello.agentId} (${existing.name}) is already attached; a second agent with the same id is refused`,
        "agent_id",
      );
    }
    const now = this.now();
    const entry: AgentEntry = {
      id: hello.agentId,
      name: hello.name,
      hostname: hello.hostname,
      agentVersion: hello.agentVersion,
      protocolVersion: hello.protocolVersion,
      adbVersion: hello.adbVersion,
      heartbeatIntervalMs: hello.heartbeatIntervalMs,
      connectedAt: now,
      lastHeartbeatAt: now,
      session,
      devices: existing?.devices ?? new Map(),
      drainReason: hello.drainReason,
      transport,
    };
    this.agents.set(entry.id, entry);
    const row = {
      id: entry.id,
      name: entry.name,
      hostname: entry.hostname,
      agentVersion: entry.agentVersion,
      protocolVersion: entry.protocolVersion,
      adbVersion: entry.adbVersion,
      heartbeatIntervalMs: entry.heartbeatIntervalMs,
      connectedAt: now,
      lastHeartbeatAt: now,
    };
    this.db.insert(agents).values(row).onConflictDoUpdate({ target: agents.id, set: row }).run();
    this.changed();
    this.announceAgent(entry, true);
  }

  /** Forgets the stream if it is still the current one. */
  detach(agentId: string, session: AgentSession): void {
    const entry = this.agents.get(agentId);
    if (!entry || entry.session !== session) return;
    entry.session = null;
    this.persistHeartbeat(entry);
    this.changed();
    this.announceAgent(entry, true);
  }

  /** The agent takes no new work: its devices are no longer lease candidates. */
  setDraining(agentId: string, reason: string): void {
    const entry = this.agents.get(agentId);
    if (!entry) return;
    entry.drainReason = reason;
    this.changed();
    this.announceAgent(entry, false);
  }

  /** Agent by id or name. */
  findAgent(idOrName: string): Agent | undefined {
    const e = [...this.agents.values()].find((a) => a.id === idOrName || a.name === idOrName);
    return e ? toAgent(e) : undefined;
  }

  isAttached(agentId: string, session: AgentSession): boolean {
    return this.agents.get(agentId)?.session === session;
  }

  heartbeat(agentId: string): void {
    const entry = this.agents.get(agentId);
    if (!entry) return;
    entry.lastHeartbeatAt = this.now();
    this.dirtyHeartbeats.add(agentId);
    if (entry.lastHeartbeatAt - (this.heartbeatAnnounced.get(agentId) ?? 0) >= HEARTBEAT_EVENT_MS) this.announceAgent(entry, false);
  }

  /** Replaces everything known about this agent's devices. */
  replaceInventory(agentId: string, reports: DeviceReport[]): void {
    const entry = this.requireAgent(agentId);
    const now = this.now();
    const next = new Map<string, DeviceEntry>();
    for (const r of reports) next.set(r.serial, toEntry(r, now));
    const gone = [...entry.devices.keys()].filter((serial) => !next.has(serial));
    entry.devices = next;
    this.db.transaction((tx) => {
      tx.delete(devices).where(eq(devices.agentId, agentId)).run();
      for (const d of next.values()) tx.insert(devices).values(toRow(agentId, d)).run();
    });
    this.changed();
    if (this.watched()) for (const serial of gone) this.onEvent?.({ kind: "deviceRemoved", agentId, serial });
    this.announceAgent(entry, true);
  }

  upsertDevice(agentId: string, report: DeviceReport): void {
    const entry = this.requireAgent(agentId);
    const d = toEntry(report, this.now());
    entry.devices.set(d.serial, d);
    const row = toRow(agentId, d);
    this.db
      .insert(devices)
      .values(row)
      .onConflictDoUpdate({ target: [devices.agentId, devices.serial], set: row })
      .run();
    this.changed();
    this.announceDevice(entry, d);
  }

  removeDevice(agentId: string, serial: string): void {
    const entry = this.requireAgent(agentId);
    entry.devices.delete(serial);
    this.candidateCache = undefined;
    this.db
      .delete(devices)
      .where(and(eq(devices.agentId, agentId), eq(devices.serial, serial)))
      .run();
    this.onEvent?.({ kind: "deviceRemoved", agentId, serial });
    this.announceAgent(entry, false);
  }

  /**
   * Ends the sessions of agents that missed `heartbeatMisses` intervals and
   * returns their ids. Their devices stay listed as agent-offline.
   */
  sweep(): string[] {
    const now = this.now();
    const expired: string[] = [];
    for (const entry of this.agents.values()) {
      if (!entry.session || entry.lastHeartbeatAt === null) continue;
      const deadline = entry.lastHeartbeatAt + entry.heartbeatIntervalMs * this.opts.heartbeatMisses;
      if (now <= deadline) continue;
      const session = entry.session;
      entry.session = null;
      this.persistHeartbeat(entry);
      this.candidateCache = undefined;
      expired.push(entry.id);
      this.announceAgent(entry, true);
      session.terminate(
        farmError(
          Code.Unavailable,
          "AGENT_HEARTBEAT_MISSED",
          `no heartbeat for ${now - entry.lastHeartbeatAt} ms (${this.opts.heartbeatMisses} intervals of ${entry.heartbeatIntervalMs} ms)`,
        ),
      );
    }
    return expired;
  }

  /** Writes batched heartbeat times; called periodically and at shutdown. */
  flushHeartbeats(): void {
    if (this.dirtyHeartbeats.size === 0) return;
    const ids = [...this.dirtyHeartbeats];
    this.dirtyHeartbeats.clear();
    this.db.transaction((tx) => {
      for (const id of ids) {
        const e = this.agents.get(id);
        if (e) tx.update(agents).set({ lastHeartbeatAt: e.lastHeartbeatAt }).where(eq(agents.id, id)).run();
      }
    });
  }

  /** Terminates every live session (coordinator shutdown). */
  terminateAll(err: Error): void {
    for (const entry of this.agents.values()) {
      const s = entry.session;
      if (!s) continue;
      entry.session = null;
      this.candidateCache = undefined;
      s.terminate(err);
    }
    this.flushHeartbeats();
  }

  listAgents(): Agent[] {
    return [...this.agents.values()].sort(byName).map(toAgent);
  }

  /** Tells watchers about an agent and, when its online state may have changed, every device it reports. */
  private announceAgent(entry: AgentEntry, withDevices: boolean): void {
    if (!this.onEvent || !this.watched()) return;
    this.heartbeatAnnounced.set(entry.id, entry.lastHeartbeatAt ?? 0);
    this.onEvent({ kind: "agent", agent: toAgent(entry) });
    if (withDevices) for (const d of entry.devices.values()) this.announceDevice(entry, d);
  }

  private announceDevice(entry: AgentEntry, d: DeviceEntry): void {
    if (!this.onEvent || !this.watched()) return;
    this.onEvent({ kind: "device", device: toDevice(entry, d, entry.session !== null ? d.state : AGENT_OFFLINE) });
  }

  listDevices(filter: DeviceFilter = {}): Device[] {
    return this.selectDevices(filter, (agent, d, state) => toDevice(agent, d, state));
  }

  /**
   * The same list as encoded Device messages. Each device is encoded once
   * and reused until it changes, so listing thousands of devices costs a
   * copy rather than thousands of reflective encodes.
   */
  listDevicesEncoded(filter: DeviceFilter = {}): Uint8Array[] {
    return this.selectDevices(filter, (agent, d, state) => {
      const key = `${state}\0${agent.name}`;
      if (d.wire?.key !== key) d.wire = { key, bytes: toBinary(DeviceSchema, toDevice(agent, d, state)) };
      return d.wire.bytes;
    });
  }

  private selectDevices<T>(filter: DeviceFilter, map: (agent: AgentEntry, d: DeviceEntry, state: string) => T): T[] {
    const out: T[] = [];
    for (const agent of [...this.agents.values()].sort(byName)) {
      if (filter.agent && filter.agent !== agent.id && filter.agent !== agent.name) continue;
      const online = agent.session !== null;
      const serials = [...agent.devices.keys()].sort();
      for (const serial of serials) {
        const d = agent.devices.get(serial) as DeviceEntry;
        const state = online ? d.state : AGENT_OFFLINE;
        if (filter.state && filter.state !== state) continue;
        out.push(map(agent, d, state));
      }
    }
    return out;
  }

  /**
   * The one agent that reports this adb serial (optionally named). A serial
   * seen on two agents needs the agent named; a device whose agent is not
   * attached fails: a command is never re-routed through another alias.
   */
  route(serial: string, agent = ""): Route {
    const matches = [...this.agents.values()].filter(
      (a) => a.devices.has(serial) && (agent === "" || a.id === agent || a.name === agent),
    );
    const notDispatched = { dispatched: false, ambiguous: false };
    if (matches.length === 0) {
      throw actionError(Code.NotFound, ErrorCodes.deviceNotFound, `no agent reports a device with serial ${serial}${agent ? ` on agent ${agent}` : ""}`, notDispatched, "serial");
    }
    if (matches.length > 1) {
      throw actionError(
        Code.FailedPrecondition,
        ErrorCodes.deviceAmbiguous,
        `serial ${serial} is reported by agents ${matches.map((m) => m.name).join(", ")}; name one with --agent`,
        notDispatched,
        "agent",
      );
    }
    const a = matches[0] as AgentEntry;
    if (!a.session) {
      throw actionError(Code.Unavailable, ErrorCodes.deviceOffline, `agent ${a.name}, which owns ${serial}, is offline`, notDispatched, "serial");
    }
    const props = a.devices.get(serial)?.properties;
    return { agentId: a.id, agentName: a.name, serial, physicalId: props?.physicalId ?? "", identityStatus: props?.identityStatus ?? "", session: a.session };
  }

  /**
   * Online serials whose phone identity is known and unambiguous, sorted by
   * agent and serial: what a lease can be granted on.
   */
  candidates(): Candidate[] {
    if (this.candidateCache) return this.candidateCache;
    const out: Candidate[] = [];
    for (const a of [...this.agents.values()].sort(byName)) {
      if (!a.session || a.drainReason) continue;
      for (const serial of [...a.devices.keys()].sort()) {
        const d = a.devices.get(serial) as DeviceEntry;
        const p = d.properties;
        if (d.state !== "device" || !p.physicalId || p.identityStatus === "duplicate") continue;
        out.push({ physicalId: p.physicalId, agentId: a.id, agentName: a.name, serial, model: p.model, apiLevel: p.apiLevel });
      }
    }
    this.candidateCache = out;
    return out;
  }

  /** Cached list for lease grants; dropped on every change. */
  private candidateCache: Candidate[] | undefined;

  /**
   * Actions with an unknown outcome on a phone, as every agent that reports
   * it (online or not) last said: any one of them blocks changes to the
   * phone through every agent.
   */
  unresolvedOn(physicalId: string): { agentId: string; agentName: string; actionIds: string[] }[] {
    const out: { agentId: string; agentName: string; actionIds: string[] }[] = [];
    if (!physicalId) return out;
    for (const a of this.agents.values()) {
      const ids = new Set<string>();
      for (const d of a.devices.values()) {
        if (d.properties.physicalId === physicalId) for (const id of d.properties.unresolvedActionIds) ids.add(id);
      }
      if (ids.size > 0) out.push({ agentId: a.id, agentName: a.name, actionIds: [...ids] });
    }
    return out;
  }

  /** The physical id behind any reported serial (first agent that knows it). */
  physicalIdOf(serial: string): string | undefined {
    for (const a of this.agents.values()) {
      const id = a.devices.get(serial)?.properties.physicalId;
      if (id) return id;
    }
    return undefined;
  }

  /** Called after any change that may free or add a device. */
  onChange: (() => void) | undefined;

  private changed(): void {
    this.candidateCache = undefined;
    this.onChange?.();
  }

  /** The attached session of an agent, for requests bound to that agent (not to a device). */
  agentSession(agentId: string): { session: AgentSession; name: string } | undefined {
    const a = this.agents.get(agentId);
    return a?.session ? { session: a.session, name: a.name } : undefined;
  }

  agentName(agentId: string): string | undefined {
    return this.agents.get(agentId)?.name;
  }

  private requireAgent(agentId: string): AgentEntry {
    const e = this.agents.get(agentId);
    if (!e) throw farmError(Code.FailedPrecondition, ErrorCodes.agentProtocolViolation, "agent is not attached");
    return e;
  }

  private persistHeartbeat(entry: AgentEntry): void {
    this.dirtyHeartbeats.delete(entry.id);
    this.db.update(agents).set({ lastHeartbeatAt: entry.lastHeartbeatAt }).where(eq(agents.id, entry.id)).run();
  }
}

function byName(a: AgentEntry, b: AgentEntry): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

function toAgent(e: AgentEntry): Agent {
  return create(AgentSchema, {
    id: e.id,
    name: e.name,
    hostname: e.hostname,
    online: e.session !== null,
    agentVersion: e.agentVersion,
    protocolVersion: e.protocolVersion,
    adbVersion: e.adbVersion,
    heartbeatIntervalMs: e.heartbeatIntervalMs,
    lastHeartbeatTime: e.lastHeartbeatAt === null ? undefined : timestampFromMs(e.lastHeartbeatAt),
    connectedTime: e.connectedAt === null ? undefined : timestampFromMs(e.connectedAt),
    deviceCount: e.devices.size,
    draining: e.drainReason !== "",
    drainReason: e.drainReason,
    transport: e.transport,
  });
}

function toDevice(agent: AgentEntry, d: DeviceEntry, state: string): Device {
  return create(DeviceSchema, {
    serial: d.serial,
    agentId: agent.id,
    agentName: agent.name,
    state,
    properties: d.properties,
    updateTime: timestampFromMs(d.updatedAt),
  });
}

function toEntry(r: DeviceReport, now: number): DeviceEntry {
  return {
    serial: r.serial,
    state: r.state,
    properties: r.properties ?? create(DevicePropertiesSchema),
    updatedAt: now,
  };
}

function toRow(agentId: string, d: DeviceEntry): typeof devices.$inferInsert {
  // Every field, in protobuf JSON: a property added to DeviceProperties survives a restart without a change here.
  return { agentId, serial: d.serial, state: d.state, properties: toJsonString(DevicePropertiesSchema, d.properties), updatedAt: d.updatedAt };
}

function parseProperties(json: string): DeviceProperties {
  try {
    // Rows written before every field was kept hold a subset of the same JSON names.
    return fromJsonString(DevicePropertiesSchema, json, { ignoreUnknownFields: true });
  } catch {
    return create(DevicePropertiesSchema);
  }
}
