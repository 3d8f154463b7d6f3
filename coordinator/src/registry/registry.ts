import { EventEmitter } from "node:events";
import { create, fromJson, toBinary, toJson } from "@bufbuild/protobuf";
import { lengthDelimited } from "@farm/shared/pre-encoded";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { actionError, Errors, farmError } from "@farm/shared/errors";
import { AgentSchema, DevicePropertiesSchema, DeviceSchema, type Agent, type Device, type DeviceProperties } from "@farm/shared/gen/farm/v1/registry_pb";
import type { AgentHello, DeviceReport } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { Logger } from "@farm/shared/log";
import { checkInventory, checkReport, MAX_DEVICES_PER_AGENT } from "./inventory-limits.js";
import { partitionPoint, readPage, type Page, type PageRequest } from "../paging.js";
import { claimKeys, DeviceClaims } from "./device-claims.js";
import { Liveness } from "./liveness.js";
import { SharedStrings } from "./shared-strings.js";
import type { AgentRow, ClaimRow, DeviceRow, RegistryStore, StoredRegistry } from "./registry-store.js";

/** State shown for devices whose agent is not attached. */
/** Physical ids begin so (agent/src/devices/physical-identity.ts): a target that does, and is no serial an agent reports, is taken as one. */
const PHYSICAL_ID_PREFIX = "pd-";
/** Ids as lists print them may end in an ellipsis where they were cut. */
const CUT_ID = /(…|\.\.\.)$/u;

export const AGENT_OFFLINE = "agent-offline";
/** State shown for a serial whose agent's claim on it no admin has accepted: no leases, no routed commands. */
export const QUARANTINED = "quarantined";
/** A phone whose cleanup after a lease failed: no leases until an admin clears it. */
export const NEEDS_ATTENTION = "needs-attention";
/** A phone whose cleanup after a lease runs: no leases until it is done. */
export const CLEANING = "cleaning";
/**
 * A serial adb shows as `device` whose phone identity the agent has not read
 * yet: no leases, and whether it is marked (marks are kept by physical id) is
 * not known, so it is not listed as plainly usable.
 */
export const IDENTITY_PENDING = "identity-pending";

/** Why a phone is held out of the pool between users (the cleanup policy). */
export interface DeviceHold {
  state: typeof CLEANING | typeof NEEDS_ATTENTION;
  reason: string;
}

/** The live control stream of an attached agent, as the registry sees it. */
export interface AgentSession {
  /** Ends the stream with this error (the agent will reconnect). */
  terminate(err: Error): void;
  /** Set when another coordinator replica holds the stream: its id (heartbeats are that replica's to judge). */
  readonly replicaId?: string;
  /** For a stream another replica holds: whether that replica still has it open (false when it cannot say). */
  stillHeld?(): Promise<boolean>;
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
  /** Why this agent may not use this serial (an unaccepted claim); empty when it may. */
  quarantine: string;
  /**
   * Kept from the agent's last stream and not reported on by its current one
   * yet: what it said then, not what it says now (a restarted agent may not
   * have the phone again), so it is listed agent-offline and never leased.
   */
  stale?: true;
  /** The device as listed, encoded once until what it was encoded with changes. */
  wire?: DeviceWire;
}

/**
 * A listed device's encoding (`delimited`: its length, then its bytes, as
 * the repeated field carries it) and the values besides the entry it was built
 * from. The inputs are kept as they are rather than joined into one key
 * string: a key cost every listing a new string per device (garbage) and
 * every device a kept one; a view of the bare bytes is made only when asked.
 */
interface DeviceWire {
  state: string;
  agentName: string;
  quarantine: string;
  holdReason: string;
  delimited: Uint8Array;
  /** Where the message's bytes start in `delimited` (after the length). */
  start: number;
}

/** A stored agent plus what only lives in memory: its stream, its devices, its draining. */
interface AgentEntry extends AgentRow {
  session: AgentSession | null;
  devices: Map<string, DeviceEntry>;
  /** The keys of `devices` in order, for paged listing; dropped whenever a serial is added or removed. */
  sortedSerials?: string[];
  /** Set while the agent drains; cleared when it attaches again without draining. */
  drainReason: string;
  /** How its current or last control stream arrived. */
  transport: string;
  /** Why its last stream ended (e.g. "token revoked"); a new attach starts without one. */
  offlineReason?: string;
  /** Its reports being written here, and when the last such write ended (liveness waits for them: see deadlineOf). */
  writing?: number;
  writtenAt?: number;
}

/**
 * What the registry tells its listeners. `agent`, `device` and
 * `deviceRemoved` are for live watchers (dashboards) and are only built
 * while someone listens to them: attach and heartbeats are hot paths.
 */
export interface RegistryEvents {
  /** After any change that may free or add a lease candidate. */
  change: [];
  /** An agent as it is shown now. */
  agent: [agent: Agent];
  /** A device as it is shown now. */
  device: [device: Device];
  deviceRemoved: [agentId: string, serial: string];
  /**
   * This replica stored a change to this agent (other replicas re-read it):
   * it attached here, its stream here ended, its devices or claims changed,
   * or it was removed. Not emitted for changes read from another replica.
   */
  stored: [agentId: string, what: "attached" | "detached" | "changed" | "removed"];
}

export interface DeviceFilter {
  agent?: string;
  state?: string;
  /** Only the serials of this physical device (its aliases). */
  physicalId?: string;
}

/** A listed row with its paging key: (agent id, serial). */
interface Keyed<T> {
  key: readonly [string, string];
  value: T;
}

export interface RegistryOptions {
  heartbeatMisses: number;
  now?: () => number;
  log?: Logger;
}

/**
 * Agents and their devices. Reads are served from memory; every change is
 * written through to the store so a restarted coordinator still lists what
 * it knew (as agent-offline) until agents re-attach. Heartbeats are batched
 * (liveness.ts).
 *
 * A change is stored before memory shows it and before its caller is
 * answered. Changes run one at a time, in call order (`serialized`): each
 * one decides on the state the previous one left (two agents reporting the
 * same phone at once cannot both be first to claim it), and the store sees
 * them in the order memory does. A stream that ends (detach, sweep,
 * shutdown) goes offline at once: that state lives only in memory.
 */
export class Registry {
  readonly events = new EventEmitter<RegistryEvents>();
  private readonly agents = new Map<string, AgentEntry>();
  private readonly claims: DeviceClaims;
  /** One copy of the property values phones report alike. */
  private readonly shared = new SharedStrings();
  private readonly liveness: Liveness;
  /** Cached list for lease grants; dropped on every change. */
  private candidateCache: Candidate[] | undefined;
  /** Phones held out of the pool by their cleanup, by physical id. */
  private readonly holds = new Map<string, DeviceHold>();
  /** Agent ids in order, for paged listing; dropped when an agent is added or removed. */
  private agentIds: string[] | undefined;
  /** The last change queued by `serialized`; never rejects. */
  private tail: Promise<void> = Promise.resolve();

  /** A registry with what the store holds: every agent offline until it attaches again. */
  static async open(store: RegistryStore, opts: RegistryOptions): Promise<Registry> {
    return new Registry(store, opts, await store.load());
  }

  private constructor(
    private readonly store: RegistryStore,
    private readonly opts: RegistryOptions,
    stored: StoredRegistry,
  ) {
    this.claims = new DeviceClaims(stored.claims, () => this.now());
    this.liveness = new Liveness(store, opts.heartbeatMisses);
    for (const row of stored.agents) {
      this.agents.set(row.id, { ...row, session: null, devices: new Map(), drainReason: "", transport: "" });
    }
    for (const row of stored.devices) {
      const agent = this.agents.get(row.agentId);
      if (!agent) continue;
      const properties = this.shared.shareProperties(parseProperties(row.properties));
      agent.devices.set(row.serial, {
        serial: row.serial,
        state: this.shared.share(row.state),
        properties,
        updatedAt: row.updatedAt,
        quarantine: this.quarantineOf(agent.id, row.serial, properties.physicalId),
      });
    }
  }

  private toEntry(r: DeviceReport, now: number): DeviceEntry {
    return {
      serial: r.serial,
      state: this.shared.share(r.state),
      properties: this.shared.shareProperties(r.properties ?? create(DevicePropertiesSchema)),
      updatedAt: now,
      quarantine: "",
    };
  }

  private now(): number {
    return this.opts.now?.() ?? Date.now();
  }

  /** Registers an attached agent once it is stored; refuses a second stream for the same id. */
  attach(hello: AgentHello, session: AgentSession, transport = ""): Promise<void> {
    return this.serialized(async () => {
      const existing = this.agents.get(hello.agentId);
      // Held by another replica: the agent reconnected here, so that stream is gone or going (that replica hears it and lets go).
      if (existing?.session && !existing.session.replicaId) {
        throw farmError(
          Errors.AGENT_ALREADY_ATTACHED,
          `agent ${hello.agentId} (${existing.name}) is already attached; a second agent with the same id is refused`,
          "agent_id",
        );
      }
      const now = this.now();
      const row: AgentRow = {
        id: hello.agentId,
        name: hello.name,
        hostname: hello.hostname,
        agentVersion: hello.agentVersion,
        protocolVersion: hello.protocolVersion,
        adbVersion: hello.adbVersion,
        heartbeatIntervalMs: hello.heartbeatIntervalMs,
        connectedAt: now,
        lastHeartbeatAt: now,
      };
      await this.store.saveAgent(row);
      // Until this stream reports them (its inventory comes next), the devices kept are its last stream's word.
      for (const d of existing?.devices.values() ?? []) d.stale = true;
      const entry: AgentEntry = { ...row, session, devices: existing?.devices ?? new Map(), drainReason: hello.drainReason, transport };
      this.agents.set(entry.id, entry);
      this.liveness.track(entry);
      if (!existing) this.agentIds = undefined;
      this.changed();
      this.announceAgent(entry, true);
      this.events.emit("stored", entry.id, "attached");
    });
  }

  /**
   * Forgets the stream if it is still the current one: at once (nothing is
   * routed to it any more). Resolves once its last heartbeat time is stored.
   */
  detach(agentId: string, session: AgentSession, reason = ""): Promise<void> {
    const entry = this.agents.get(agentId);
    if (!entry || entry.session !== session) return Promise.resolve();
    entry.session = null;
    entry.offlineReason = reason;
    this.changed();
    this.announceAgent(entry, true);
    this.events.emit("stored", agentId, "detached");
    return this.persistHeartbeats([agentId]);
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
    const e = this.agentByIdOrName(idOrName);
    return e ? toAgent(e) : undefined;
  }

  isAttached(agentId: string, session: AgentSession): boolean {
    return this.agents.get(agentId)?.session === session;
  }

  heartbeat(agentId: string): void {
    const entry = this.agents.get(agentId);
    if (!entry) return;
    entry.lastHeartbeatAt = this.now();
    if (this.liveness.beat(entry)) this.announceAgent(entry, false);
  }

  /** Replaces everything known about this agent's devices. */
  replaceInventory(agentId: string, reports: DeviceReport[]): Promise<void> {
    return this.writingFor(agentId, () => this.serialized(() => this.replaceStored(agentId, reports)));
  }

  /**
   * Runs a write of what this agent reported, queue wait included. Its
   * stream is not read meanwhile, so the time is not counted against its
   * heartbeats: at a fleet's first start, hundreds of inventories queue for
   * the store, and an agent waiting its turn was being ended for heartbeats
   * it had sent and that were waiting unread.
   */
  private async writingFor<T>(agentId: string, write: () => Promise<T>): Promise<T> {
    const entry = this.agents.get(agentId);
    if (!entry) return await write();
    entry.writing = (entry.writing ?? 0) + 1;
    try {
      return await write();
    } finally {
      entry.writing -= 1;
      if (entry.writing === 0) {
        entry.writtenAt = this.now();
        this.liveness.track(entry);
      }
    }
  }

  private async replaceStored(agentId: string, reports: DeviceReport[]): Promise<void> {
    const entry = this.requireAgent(agentId);
    checkInventory(reports);
    const now = this.now();
    const next = new Map<string, DeviceEntry>();
    const newClaims: ClaimRow[] = [];
    try {
      for (const r of reports) next.set(r.serial, this.claimed(entry, this.toEntry(r, now), newClaims));
      // New claims commit with the inventory that makes them: one write, not one per device.
      const pending = await this.store.replaceDevices(agentId, [...next.values()].map((d) => toRow(agentId, d)), newClaims);
      this.ownedElsewhere(entry, pending, [...next.values()]);
    } catch (err) {
      this.claims.unclaim(newClaims);
      throw err;
    }
    const gone = [...entry.devices.keys()].filter((serial) => !next.has(serial));
    entry.devices = next;
    entry.sortedSerials = undefined;
    this.changed();
    if (this.listening("deviceRemoved")) { for (const serial of gone) this.events.emit("deviceRemoved", agentId, serial); }
    this.announceAgent(entry, true);
    this.events.emit("stored", agentId, "changed");
  }

  upsertDevice(agentId: string, report: DeviceReport): Promise<void> {
    return this.writingFor(agentId, () => this.serialized(() => this.upsertStored(agentId, report)));
  }

  private async upsertStored(agentId: string, report: DeviceReport): Promise<void> {
    const entry = this.requireAgent(agentId);
    checkReport(report);
    if (!entry.devices.has(report.serial) && entry.devices.size >= MAX_DEVICES_PER_AGENT) {
      throw farmError(Errors.INVENTORY_TOO_LARGE, `agent ${entry.name} already reports ${entry.devices.size} devices; an agent may report at most ${MAX_DEVICES_PER_AGENT}`, "devices");
    }
    const newClaims: ClaimRow[] = [];
    let d: DeviceEntry;
    try {
      d = this.claimed(entry, this.toEntry(report, this.now()), newClaims);
      const pending = await this.store.saveDevice(toRow(agentId, d), newClaims);
      this.ownedElsewhere(entry, pending, [d]);
    } catch (err) {
      this.claims.unclaim(newClaims);
      throw err;
    }
    if (!entry.devices.has(d.serial)) entry.sortedSerials = undefined;
    entry.devices.set(d.serial, d);
    this.changed();
    this.announceDevice(entry, d);
    this.events.emit("stored", agentId, "changed");
  }

  removeDevice(agentId: string, serial: string): Promise<void> {
    return this.writingFor(agentId, () => this.removeDeviceStored(agentId, serial));
  }

  private removeDeviceStored(agentId: string, serial: string): Promise<void> {
    return this.serialized(async () => {
      const entry = this.requireAgent(agentId);
      await this.store.deleteDevice(agentId, serial);
      if (entry.devices.delete(serial)) entry.sortedSerials = undefined;
      // Nothing to dispatch: a device going away frees nothing.
      this.candidateCache = undefined;
      this.events.emit("deviceRemoved", agentId, serial);
      this.announceAgent(entry, false);
      this.events.emit("stored", agentId, "changed");
    });
  }

  /**
   * Ends the sessions of agents that missed `heartbeatMisses` intervals (at
   * once) and returns their ids once their last heartbeat times are stored.
   * Their devices stay listed as agent-offline.
   */
  async sweep(): Promise<string[]> {
    const now = this.now();
    const expired: string[] = [];
    if (!this.liveness.sweepDue(now)) return expired;
    for (const entry of this.agents.values()) {
      const session = entry.session;
      if (!session || session.replicaId) continue;
      const missed = this.liveness.overdue(entry, now);
      if (!missed) {
        this.liveness.track(entry);
        continue;
      }
      entry.session = null;
      this.candidateCache = undefined;
      expired.push(entry.id);
      this.announceAgent(entry, true);
      session.terminate(missed);
      this.events.emit("stored", entry.id, "detached");
    }
    if (expired.length > 0) await this.persistHeartbeats(expired);
    return expired;
  }

  /**
   * Another replica changed this agent (attached it, reported devices,
   * decided a claim, removed it): re-reads it from the store. `remote` is
   * the stream of the replica that holds it now; without one, a stream this
   * replica holds stays as it is. A stream this replica still holds for an
   * agent that attached elsewhere is ended: the agent itself moved.
   */
  refreshAgent(agentId: string, remote?: AgentSession): Promise<void> {
    return this.serialized(async () => {
      const before = this.agents.get(agentId);
      const keys = before ? [...before.devices.values()].flatMap((d) => claimKeys(d.serial, d.properties.physicalId)) : [];
      let stored = await this.store.loadAgent(agentId, keys);
      const row = stored.agents[0];
      // The claims on every key its devices make now, not only the ones they made before.
      const now = row ? stored.devices.flatMap((d) => claimKeys(d.serial, parseProperties(d.properties).physicalId)) : [];
      if (now.some((k) => !keys.includes(k))) stored = await this.store.loadAgent(agentId, [...new Set([...keys, ...now])]);
      const local = before?.session && !before.session.replicaId ? before.session : null;
      if (local && remote) local.terminate(farmError(Errors.AGENT_ALREADY_ATTACHED, "the agent attached to another coordinator replica"));
      this.claims.restore(stored.claims);
      if (!row) {
        if (!before) return;
        this.claims.forgetAgent(agentId);
        this.agents.delete(agentId);
        this.agentIds = undefined;
        this.liveness.forget(agentId);
        this.changed();
        if (this.listening("deviceRemoved")) { for (const serial of before.devices.keys()) this.events.emit("deviceRemoved", agentId, serial); }
        return;
      }
      const devicesNow = new Map<string, DeviceEntry>();
      for (const d of stored.devices) {
        const properties = this.shared.shareProperties(parseProperties(d.properties));
        devicesNow.set(d.serial, { serial: d.serial, state: this.shared.share(d.state), properties, updatedAt: d.updatedAt, quarantine: this.quarantineOf(agentId, d.serial, properties.physicalId) });
      }
      const entry: AgentEntry = {
        ...row,
        session: remote ?? local,
        devices: devicesNow,
        drainReason: before?.drainReason ?? "",
        transport: before?.transport ?? "",
      };
      this.agents.set(agentId, entry);
      this.liveness.track(entry);
      if (!before) this.agentIds = undefined;
      const gone = before ? [...before.devices.keys()].filter((serial) => !devicesNow.has(serial)) : [];
      this.changed();
      if (this.listening("deviceRemoved")) { for (const serial of gone) this.events.emit("deviceRemoved", agentId, serial); }
      this.announceAgent(entry, true);
    });
  }

  /** A replica is gone: the agents whose streams it held are offline until they attach again (to any replica). */
  dropReplica(replicaId: string): string[] {
    const dropped: string[] = [];
    for (const entry of this.agents.values()) {
      if (entry.session?.replicaId !== replicaId) continue;
      entry.session = null;
      entry.offlineReason = "its coordinator replica is gone";
      dropped.push(entry.id);
      this.announceAgent(entry, true);
    }
    if (dropped.length > 0) this.changed();
    return dropped;
  }

  /** Agents whose streams this replica holds itself. */
  localAgents(): string[] {
    return [...this.agents.values()].filter((a) => a.session && !a.session.replicaId).map((a) => a.id);
  }

  /** Writes batched heartbeat times; called periodically and at shutdown. */
  flushHeartbeats(): Promise<void> {
    return this.serialized(() => this.liveness.flush((id) => this.agents.get(id)));
  }

  /** Terminates every live session (coordinator shutdown) and writes the heartbeat times not yet written. */
  terminateAll(err: Error): Promise<void> {
    for (const entry of this.agents.values()) {
      const s = entry.session;
      if (!s) continue;
      entry.session = null;
      this.candidateCache = undefined;
      s.terminate(err);
    }
    return this.flushHeartbeats();
  }

  /** Every agent, by name: for the coordinator itself (the API reads pages). */
  listAgents(): Agent[] {
    return [...this.agents.values()].sort(byName).map(toAgent);
  }

  /** One page of agents by id: unlike the name, an agent's id never changes, so its place in the list does not either. */
  listAgentsPage(page: PageRequest): Page<Agent> {
    return readPage(page, { list: "agents" }, ["string"] as const, (a: Agent) => [a.id] as const, (after, limit) => {
      const ids = this.orderedAgentIds();
      const from = after ? partitionPoint(ids, (id) => id <= after[0]) : 0;
      return ids.slice(from, from + limit).map((id) => toAgent(this.agents.get(id) as AgentEntry));
    });
  }

  /** Every matching device, by agent name and serial: for the coordinator itself (the API reads pages). */
  listDevices(filter: DeviceFilter = {}): Device[] {
    return this.selectDevices(filter, (agent, d, state) => toDevice(agent, d, state, this.holds.get(d.properties.physicalId)));
  }

  /** One page of matching devices, by (agent id, serial). */
  listDevicesPage(filter: DeviceFilter, page: PageRequest): Page<Device> {
    return this.devicePage(filter, page, (agent, d, state) => toDevice(agent, d, state, this.holds.get(d.properties.physicalId)));
  }

  /**
   * The same page as encoded Device messages. Each device is encoded once
   * and reused until it changes, so listing thousands of devices costs a
   * copy rather than thousands of reflective encodes.
   */
  listDevicesEncoded(filter: DeviceFilter, page: PageRequest, form: "bytes" | "delimited" = "bytes"): Page<Uint8Array> {
    return this.devicePage(filter, page, (agent, d, state) => {
      const hold = this.holds.get(d.properties.physicalId);
      const holdReason = hold?.reason ?? "";
      let w = d.wire;
      if (!w || w.state !== state || w.agentName !== agent.name || w.quarantine !== d.quarantine || w.holdReason !== holdReason) {
        const bytes = toBinary(DeviceSchema, toDevice(agent, d, state, hold));
        const delimited = lengthDelimited(bytes);
        w = d.wire = { state, agentName: agent.name, quarantine: d.quarantine, holdReason, delimited, start: delimited.length - bytes.length };
      }
      return form === "delimited" ? w.delimited : w.delimited.subarray(w.start);
    });
  }

  /**
   * The serial a device target names. A serial some agent reports is itself.
   * A physical id, whole or a unique prefix (as `farm devices` shows it, cut
   * with …), is the serial its phone is reported on (an online agent's
   * first, when the phone has aliases), as git and docker take short ids:
   * a prefix of several phones' ids fails DEVICE_AMBIGUOUS listing them,
   * one phone online on two agents asks for --agent. Anything else is
   * returned as given, for route() to refuse.
   */
  serialFor(given: string, agent = ""): string {
    if (!given.startsWith(PHYSICAL_ID_PREFIX)) return given;
    for (const a of this.agents.values()) if (a.devices.has(given)) return given;
    const prefix = given.replace(CUT_ID, "");
    const places = new Map<string, { agentName: string; serial: string; online: boolean }[]>();
    for (const a of this.agents.values()) {
      if (agent !== "" && a.id !== agent && a.name !== agent) continue;
      for (const [serial, d] of a.devices) {
        const id = d.properties.physicalId;
        // An unaccepted claim never names a phone.
        if (!id || d.quarantine || !id.startsWith(prefix)) continue;
        places.set(id, [...(places.get(id) ?? []), { agentName: a.name, serial, online: a.session !== null }]);
      }
    }
    const ids = [...places.keys()].sort();
    const id = ids.includes(prefix) ? prefix : ids.length === 1 ? ids[0] : undefined;
    if (id === undefined) {
      if (ids.length === 0) return given;
      const shown = ids.length > 10 ? `${ids.slice(0, 10).join(", ")}, … (${ids.length - 10} more)` : ids.join(", ");
      throw actionError(Errors.DEVICE_AMBIGUOUS, `physical id prefix ${prefix} matches ${ids.length} phones: ${shown}; give more of the id`, { dispatched: false, ambiguous: false }, "target.serial");
    }
    const on = (places.get(id) ?? []).sort((x, y) => Number(y.online) - Number(x.online) || (x.agentName < y.agentName ? -1 : x.agentName > y.agentName ? 1 : x.serial < y.serial ? -1 : 1));
    const onlineAgents = [...new Set(on.filter((p) => p.online).map((p) => p.agentName))];
    if (onlineAgents.length > 1) {
      throw actionError(Errors.DEVICE_AMBIGUOUS, `phone ${id} is reported by online agents ${onlineAgents.join(", ")}; name one with --agent`, { dispatched: false, ambiguous: false }, "target.agent");
    }
    return (on[0] as { serial: string }).serial;
  }

  /**
   * The one agent that reports this adb serial (optionally named). Only
   * attached agents whose claim on the serial counts are candidates: an
   * offline agent or a quarantined claim never makes a serial ambiguous, and
   * two usable agents need the agent named. A device whose agent is not
   * attached fails: a command is never re-routed through another alias.
   */
  route(given: string, agent = ""): Route {
    const serial = this.serialFor(given, agent);
    const matches = [...this.agents.values()].filter(
      (a) => a.devices.has(serial) && (agent === "" || a.id === agent || a.name === agent),
    );
    const notDispatched = { dispatched: false, ambiguous: false };
    if (matches.length === 0) {
      throw actionError(Errors.DEVICE_NOT_FOUND, `no agent reports a device with serial ${serial}${agent ? ` on agent ${agent}` : ""}`, notDispatched, "target.serial");
    }
    const online = matches.filter((a) => a.session !== null);
    const usable = online.filter((a) => !a.devices.get(serial)?.quarantine);
    if (usable.length > 1) {
      throw actionError(
        Errors.DEVICE_AMBIGUOUS,
        `serial ${serial} is reported by online agents ${usable.map((m) => m.name).join(", ")}; name one with --agent`,
        notDispatched,
        "target.agent",
      );
    }
    const a = usable[0];
    if (!a?.session) {
      const held = online[0];
      if (held) {
        throw actionError(Errors.DEVICE_QUARANTINED, `${serial} on agent ${held.name} is quarantined: ${held.devices.get(serial)?.quarantine ?? ""}`, notDispatched, "target.serial");
      }
      const names = matches.map((m) => m.name).join(", ");
      throw actionError(Errors.DEVICE_OFFLINE, matches.length === 1 ? `agent ${names}, which owns ${serial}, is offline` : `agents ${names}, which report ${serial}, are offline`, notDispatched, "target.serial");
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
        if (d.state !== "device" || d.stale || d.quarantine || !p.physicalId || p.identityStatus === "duplicate" || this.holds.has(p.physicalId)) continue;
        out.push({ physicalId: p.physicalId, agentId: a.id, agentName: a.name, serial, model: p.model, apiLevel: p.apiLevel });
      }
    }
    this.candidateCache = out;
    return out;
  }

  /**
   * Every serial any agent reports or last reported (online, offline, leased,
   * quarantined), with what is known of its phone: what a selector could ever
   * match. An empty physical id means its identity is not read yet.
   */
  knownPhones(): Iterable<Candidate> {
    // Walked anew each time it is iterated: a lease request stops at the first phone that could match, so no list of every phone is built on that path.
    const agents = this.agents;
    return {
      *[Symbol.iterator]() {
        for (const a of agents.values()) {
          for (const [serial, d] of a.devices) {
            const p = d.properties;
            yield { physicalId: p.physicalId, agentId: a.id, agentName: a.name, serial, model: p.model, apiLevel: p.apiLevel };
          }
        }
      },
    };
  }

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
        // An unaccepted claim cannot block the owner's phone.
        if (d.properties.physicalId === physicalId && !d.quarantine) { for (const id of d.properties.unresolvedActionIds) ids.add(id); }
      }
      if (ids.size > 0) out.push({ agentId: a.id, agentName: a.name, actionIds: [...ids] });
    }
    return out;
  }

  /** The physical id behind any reported serial (first agent that knows it and whose claim counts). */
  physicalIdOf(serial: string): string | undefined {
    for (const a of this.agents.values()) {
      const d = a.devices.get(serial);
      if (d?.properties.physicalId && !d.quarantine) return d.properties.physicalId;
    }
    return undefined;
  }

  /** The online agent that lists `serial` but has not read the phone's identity yet (it usually comes within seconds). */
  identityPendingOn(serial: string): string | undefined {
    for (const a of this.agents.values()) {
      const d = a.devices.get(serial);
      if (d && !d.properties.physicalId && !d.quarantine && a.session !== null && !d.stale) return a.name;
    }
    return undefined;
  }

  /** Why a serial has no physical id to act on: its identity is not read yet (temporary), or no agent reports it (or only a quarantined claim). */
  unresolvedSerial(serial: string, field: string): Error {
    const agent = this.identityPendingOn(serial);
    if (agent !== undefined) {
      return farmError(Errors.DEVICE_IDENTITY_PENDING, `agent ${agent} lists ${serial} but has not read the phone's identity yet; try again once \`farm devices\` shows its physical id`, field);
    }
    return farmError(Errors.DEVICE_NOT_FOUND, `no agent reports a device with serial ${serial}`, field);
  }

  /**
   * An admin's decision on an agent's claim on one of its serials (and the
   * physical id it reports there). Returns that device as listed now.
   */
  decideAlias(serial: string, agent: string, decision: "accepted" | "rejected", by: string): Promise<Device> {
    return this.serialized(() => this.decideStored(serial, agent, decision, by));
  }

  private async decideStored(serial: string, agent: string, decision: "accepted" | "rejected", by: string): Promise<Device> {
    const entry = this.agentByIdOrName(agent);
    if (!entry) throw farmError(Errors.NOT_FOUND, `no agent ${agent}`, "agent");
    const d = entry.devices.get(serial);
    if (!d) throw farmError(Errors.DEVICE_NOT_FOUND, `agent ${entry.name} reports no device with serial ${serial}`, "serial");
    // Accepted now, the acceptance would cover the adb serial only: the physical id the agent reads next is a new
    // claim, quarantined again, so the alias would look accepted and then not be. A rejection holds either way.
    if (decision === "accepted" && !d.properties.physicalId) {
      throw farmError(Errors.DEVICE_IDENTITY_PENDING, `agent ${entry.name} has not read the identity of the phone on ${serial} yet; accept once \`farm devices\` lists it with a physical id`, "serial");
    }
    const keys = claimKeys(serial, d.properties.physicalId);
    const before = this.claims.saved(entry.id, keys);
    const changed = this.claims.decide(entry.id, keys, decision, by);
    if (changed.length > 0) {
      try {
        await this.store.saveClaimDecisions(changed);
      } catch (err) {
        this.claims.restore(before);
        throw err;
      }
      this.opts.log?.warn(`device alias ${decision}`, { agent: entry.name, serial, physicalId: d.properties.physicalId, by });
      // Every serial of this agent on the same keys follows the decision.
      for (const other of entry.devices.values()) other.quarantine = this.quarantineOf(entry.id, other.serial, other.properties.physicalId);
      this.changed();
      this.announceAgent(entry, true);
      this.events.emit("stored", entry.id, "changed");
    }
    return toDevice(entry, d, this.shownState(entry, d), this.holds.get(d.properties.physicalId));
  }

  /**
   * Forgets a detached agent, its devices and its claims (a decommissioned
   * host, or one that claimed what it should not). Refused while attached:
   * it would report everything again at once.
   */
  removeAgent(idOrName: string): Promise<{ agent: Agent; removedDevices: number }> {
    return this.serialized(() => this.removeStored(idOrName));
  }

  private async removeStored(idOrName: string): Promise<{ agent: Agent; removedDevices: number }> {
    const entry = this.agentByIdOrName(idOrName);
    if (!entry) throw farmError(Errors.NOT_FOUND, `no agent ${idOrName}`, "agent");
    if (entry.session) {
      throw farmError(Errors.AGENT_STILL_ATTACHED, `agent ${entry.name} is attached; stop it (or revoke its token) before removing it`, "agent");
    }
    const agent = toAgent(entry);
    const serials = [...entry.devices.keys()];
    await this.store.deleteAgent(entry.id);
    this.claims.forgetAgent(entry.id);
    this.agents.delete(entry.id);
    this.agentIds = undefined;
    this.liveness.forget(entry.id);
    this.changed();
    if (this.listening("deviceRemoved")) { for (const serial of serials) this.events.emit("deviceRemoved", entry.id, serial); }
    this.events.emit("stored", entry.id, "removed");
    return { agent, removedDevices: serials.length };
  }

  /** The attached session of an agent, for requests bound to that agent (not to a device). */
  agentSession(agentId: string): { session: AgentSession; name: string } | undefined {
    const a = this.agents.get(agentId);
    return a?.session ? { session: a.session, name: a.name } : undefined;
  }

  agentName(agentId: string): string | undefined {
    return this.agents.get(agentId)?.name;
  }

  /**
   * Runs a change after every change queued before it, so each decides on
   * the state the previous one left and the store sees them in order. A
   * failed change does not stop the ones after it.
   */
  private serialized<T>(change: () => Promise<T>): Promise<T> {
    const run = this.tail.then(change);
    this.tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /** Writes these agents' heartbeat times now (their sessions ended), in order with every other change. */
  private persistHeartbeats(agentIds: readonly string[]): Promise<void> {
    return this.serialized(() => this.liveness.persist(agentIds, (id) => this.agents.get(id)));
  }

  private selectDevices<T>(filter: DeviceFilter, map: (agent: AgentEntry, d: DeviceEntry, state: string) => T): T[] {
    const out: T[] = [];
    for (const agent of [...this.agents.values()].sort(byName)) {
      if (!agentMatches(agent, filter)) continue;
      for (const serial of serialsOf(agent)) {
        const d = agent.devices.get(serial) as DeviceEntry;
        const state = this.shownState(agent, d);
        if (deviceMatches(d, state, filter)) out.push(map(agent, d, state));
      }
    }
    return out;
  }

  /**
   * A keyset page over (agent id, serial), the token bound to the filters.
   * The key is unique and never changes for a listed device (a state or
   * name change does not move it), so devices added or removed between two
   * pages neither repeat nor push others out.
   */
  private devicePage<T>(filter: DeviceFilter, page: PageRequest, map: (agent: AgentEntry, d: DeviceEntry, state: string) => T): Page<T> {
    const scope = { list: "devices", filter: { agent: filter.agent, state: filter.state, physicalId: filter.physicalId } };
    const keyed = readPage(page, scope, ["string", "string"] as const, (r: Keyed<T>) => r.key, (after, limit) => this.devicesAfter(filter, after, limit, map));
    return { items: keyed.items.map((r) => r.value), nextPageToken: keyed.nextPageToken };
  }

  /**
   * Up to `limit` matching devices strictly after `after`, walking the kept
   * orders from a binary-searched start: no sort per page (orders are
   * rebuilt only after a serial or an agent is added or removed).
   */
  private devicesAfter<T>(filter: DeviceFilter, after: readonly [string, string] | undefined, limit: number, map: (agent: AgentEntry, d: DeviceEntry, state: string) => T): Keyed<T>[] {
    const out: Keyed<T>[] = [];
    const ids = this.orderedAgentIds();
    for (let i = after ? partitionPoint(ids, (id) => id < after[0]) : 0; i < ids.length && out.length < limit; i++) {
      const agent = this.agents.get(ids[i] as string) as AgentEntry;
      if (!agentMatches(agent, filter)) continue;
      const serials = serialsOf(agent);
      for (let j = after && agent.id === after[0] ? partitionPoint(serials, (s) => s <= after[1]) : 0; j < serials.length && out.length < limit; j++) {
        const d = agent.devices.get(serials[j] as string) as DeviceEntry;
        const state = this.shownState(agent, d);
        if (deviceMatches(d, state, filter)) out.push({ key: [agent.id, d.serial], value: map(agent, d, state) });
      }
    }
    return out;
  }

  private orderedAgentIds(): string[] {
    return (this.agentIds ??= [...this.agents.keys()].sort());
  }

  /** Records the claims a report makes (new ones into `newClaims`, logging the contested ones) and marks the entry. */
  private claimed(agent: AgentEntry, d: DeviceEntry, newClaims: ClaimRow[]): DeviceEntry {
    const { added, contested } = this.claims.claim(agent.id, claimKeys(d.serial, d.properties.physicalId));
    newClaims.push(...added);
    d.quarantine = this.quarantineOf(agent.id, d.serial, d.properties.physicalId);
    if (contested.length > 0) {
      this.opts.log?.warn("device quarantined: an agent claims what another agent reported first", { agent: agent.name, agentId: agent.id, serial: d.serial, keys: contested, reason: d.quarantine });
    }
    return d;
  }

  /**
   * Claims the database stored pending because another agent owned the key
   * first (through another replica, so this one had not heard yet): the
   * devices that make them are quarantined like any contested claim.
   */
  private ownedElsewhere(agent: AgentEntry, pending: readonly ClaimRow[], made: readonly DeviceEntry[]): void {
    if (pending.length === 0) return;
    this.claims.restore(pending);
    for (const d of made) {
      const quarantine = this.quarantineOf(agent.id, d.serial, d.properties.physicalId);
      if (quarantine === d.quarantine) continue;
      d.quarantine = quarantine;
      this.opts.log?.warn("device quarantined: an agent claims what another agent reported first", { agent: agent.name, agentId: agent.id, serial: d.serial, keys: pending.map((c) => c.key), reason: quarantine });
    }
  }

  private quarantineOf(agentId: string, serial: string, physicalId: string): string {
    const b = this.claims.blocker(agentId, claimKeys(serial, physicalId));
    if (!b) return "";
    const [kind, value] = [b.key.slice(0, b.key.indexOf(":")), b.key.slice(b.key.indexOf(":") + 1)];
    const what = kind === "physical" ? `physical id ${value}` : `adb serial ${value}`;
    if (b.status === "rejected") return `${b.decidedBy || "an admin"} rejected this agent's claim on ${what}`;
    const owners = b.others.map((id) => this.agents.get(id)?.name ?? id);
    const name = this.agents.get(agentId)?.name ?? agentId;
    return `${what} is reported by ${owners.length > 0 ? `agent ${owners.join(", ")}` : "another agent"} first; an admin accepts this alias with \`farm device alias accept --device ${serial} --agent ${name}\``;
  }

  /**
   * Holds a phone out of the pool (cleaning, needs-attention) or lets it
   * back (undefined): leases skip a held phone, listings show its state.
   */
  setHold(physicalId: string, hold: DeviceHold | undefined): void {
    const cur = this.holds.get(physicalId);
    if (cur?.state === hold?.state && cur?.reason === hold?.reason) return;
    if (hold) this.holds.set(physicalId, hold);
    else this.holds.delete(physicalId);
    this.changed();
    if (this.listening("device")) {
      for (const a of this.agents.values()) {
        for (const d of a.devices.values()) if (d.properties.physicalId === physicalId) this.announceDevice(a, d);
      }
    }
  }

  /** Why a phone is held out of the pool, if it is. */
  holdOf(physicalId: string): DeviceHold | undefined {
    return this.holds.get(physicalId);
  }

  /**
   * Quarantine first (an admin has to act, online or not), then a cleanup's
   * mark, then whether the agent is attached and has reported the device
   * since, then whether its identity is read (a mark could not be seen
   * without it), then a running cleanup.
   */
  private shownState(agent: AgentEntry, d: DeviceEntry): string {
    if (d.quarantine) return QUARANTINED;
    const hold = d.properties.physicalId ? this.holds.get(d.properties.physicalId) : undefined;
    if (hold?.state === NEEDS_ATTENTION) return NEEDS_ATTENTION;
    const online = agent.session !== null && !d.stale;
    if (!online) return AGENT_OFFLINE;
    if (d.state !== "device") return d.state;
    if (!d.properties.physicalId) return IDENTITY_PENDING;
    return hold ? hold.state : d.state;
  }

  /** After any change that may free or add a device. */
  private changed(): void {
    this.candidateCache = undefined;
    this.events.emit("change");
  }

  private listening(event: keyof RegistryEvents): boolean {
    return this.events.listenerCount(event) > 0;
  }

  /** Tells watchers about an agent and, when its online state may have changed, every device it reports. */
  private announceAgent(entry: AgentEntry, withDevices: boolean): void {
    if (this.listening("agent")) {
      this.liveness.announced(entry);
      this.events.emit("agent", toAgent(entry));
    }
    if (withDevices && this.listening("device")) { for (const d of entry.devices.values()) this.announceDevice(entry, d); }
  }

  private announceDevice(entry: AgentEntry, d: DeviceEntry): void {
    if (!this.listening("device")) return;
    this.events.emit("device", toDevice(entry, d, this.shownState(entry, d), this.holds.get(d.properties.physicalId)));
  }

  private agentByIdOrName(idOrName: string): AgentEntry | undefined {
    return [...this.agents.values()].find((a) => a.id === idOrName || a.name === idOrName);
  }

  private requireAgent(agentId: string): AgentEntry {
    const e = this.agents.get(agentId);
    if (!e) throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, "agent is not attached");
    return e;
  }
}

/** The agent's serials in order, sorted again only after one was added or removed. */
function serialsOf(agent: AgentEntry): string[] {
  return (agent.sortedSerials ??= [...agent.devices.keys()].sort());
}

function agentMatches(agent: AgentEntry, filter: DeviceFilter): boolean {
  return !filter.agent || filter.agent === agent.id || filter.agent === agent.name;
}

function deviceMatches(d: DeviceEntry, state: string, filter: DeviceFilter): boolean {
  return (!filter.state || filter.state === state) && (!filter.physicalId || filter.physicalId === d.properties.physicalId);
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
    offlineReason: e.session === null ? (e.offlineReason ?? "") : "",
  });
}

function toDevice(agent: AgentEntry, d: DeviceEntry, state: string, hold?: DeviceHold): Device {
  return create(DeviceSchema, {
    serial: d.serial,
    agentId: agent.id,
    agentName: agent.name,
    state,
    properties: d.properties,
    updateTime: timestampFromMs(d.updatedAt),
    quarantineReason: d.quarantine,
    attentionReason: hold?.state === NEEDS_ATTENTION ? hold.reason : "",
  });
}

function toRow(agentId: string, d: DeviceEntry): DeviceRow {
  // Every field, in protobuf JSON: a property added to DeviceProperties survives a restart without a change here.
  return { agentId, serial: d.serial, state: d.state, properties: toJson(DevicePropertiesSchema, d.properties), updatedAt: d.updatedAt };
}

function parseProperties(json: DeviceRow["properties"]): DeviceProperties {
  try {
    // Rows written before every field was kept hold a subset of the same JSON names.
    return fromJson(DevicePropertiesSchema, json, { ignoreUnknownFields: true });
  } catch {
    return create(DevicePropertiesSchema);
  }
}
