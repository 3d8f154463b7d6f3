import { Errors, farmError } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { openDeviceService, type OpenService } from "../adb/adb-service.js";
import { toDispatchFailure } from "../actions/shell-outcome.js";
import { checkCoordinatorId } from "../rpc/coordinator-id.js";
import { SpareCalls } from "@farm/shared/spare-call";
import { stageTrace } from "@farm/shared/stage-trace";
import type { ServeAdbStreamRequest, ServeAdbStreamResponse } from "@farm/shared/gen/farm/v1/agent_adb_service_pb";
import { relayAdbStream, type ServeAdbStream } from "./adb-stream.js";
import { AdbTunnel, type TunnelInfo } from "./adb-tunnel.js";
import { ByteBudget } from "./byte-budget.js";
import { checkAdbService, refusalOf, serviceKind } from "./service-names.js";
import { WarmTransport } from "./warm-transport.js";

/** Streams one tunnel may have open at once (adb opens one per shell, sync, forward...); the coordinator's cap is lower. */
export const MAX_STREAMS_PER_TUNNEL = 64;
/** Bytes one tunnel's streams may hold in this agent, both ways, before they wait (--adb-tunnel-budget). */
export const DEFAULT_TUNNEL_BUDGET_BYTES = 4 * 1024 * 1024;
/** Bytes every tunnel's streams together may hold in this agent (--adb-agent-budget). */
export const DEFAULT_AGENT_BUDGET_BYTES = 16 * 1024 * 1024;

export interface AdbTunnelsOptions {
  /** This agent's adb server. */
  adb: AdbServerAddress;
  /** Opens AgentAdbService.ServeAdbStream to the coordinator. */
  serve: ServeAdbStream;
  /** The physical device a serial reaches now, when the agent knows it. */
  physicalIdOf?: (serial: string) => string | undefined;
  log?: Logger;
  maxStreamsPerTunnel?: number;
  tunnelBudgetBytes?: number;
  agentBudgetBytes?: number;
  /**
   * Starts each stream's ServeAdbStream call on one opened ahead of need
   * (shared/spare-call.ts), one spare per tunnel: the agent does; tests that
   * take the calls one by one do not.
   */
  spareCalls?: boolean;
  /**
   * Keeps one connection per tunnel to the adb server with the phone's
   * transport already selected, so a stream's open is the service request
   * alone (warm-transport.ts): the agent does; tests that take the adb
   * server's connections one by one do not.
   */
  warmTransport?: boolean;
  /** Counts a service refused before it reached the phone, by the rule that refused it ("not-a-device-service" when none did). */
  onServiceRefused?: (rule: string) => void;
}

export interface TunnelBytes {
  toDevice: number;
  fromDevice: number;
  openStreams: number;
}

/**
 * This agent's open remote adb tunnels by tunnel id. A tunnel reaches
 * exactly the serial it was opened on; its streams are device services
 * opened through the agent's adb server and relayed on streams of their
 * own to the coordinator. Every tunnel ends when the control stream to the
 * coordinator does: nobody is left to carry its streams.
 */
export class AdbTunnels {
  private readonly tunnels = new Map<string, AdbTunnel>();
  /** Each running tunnel's spare ServeAdbStream call (with spareCalls). */
  private readonly spares = new Map<AdbTunnel, SpareCalls<ServeAdbStreamRequest, ServeAdbStreamResponse>>();
  /** Each running tunnel's next adb server connection, transport selected (with warmTransport). */
  private readonly warm = new Map<AdbTunnel, WarmTransport>();
  private linkUp = true;
  /** What every tunnel's streams hold here; each tunnel's budget counts into it. */
  readonly budget: ByteBudget;

  constructor(private readonly opts: AdbTunnelsOptions) {
    this.budget = new ByteBudget(opts.agentBudgetBytes ?? DEFAULT_AGENT_BUDGET_BYTES);
  }

  /** Registers a new tunnel before its action takes the device lock, so a stop or a lost link reaches it meanwhile. */
  reserve(tunnelId: string, serial: string, requestedBy: string, leaseId = ""): AdbTunnel {
    checkCoordinatorId(tunnelId, "tunnel_id");
    if (!this.linkUp) throw farmError(Errors.COORDINATOR_UNAVAILABLE, "the control stream to the coordinator ended; no tunnel is opened for it");
    const existing = this.tunnels.get(tunnelId);
    if (existing) throw farmError(Errors.ALREADY_EXISTS, `adb tunnel ${tunnelId} is already ${existing.open ? "open" : "closing"} on this agent`, "tunnel_id");
    if (leaseId !== "") checkCoordinatorId(leaseId, "lease_id");
    const tunnel = new AdbTunnel(tunnelId, serial, requestedBy, new ByteBudget(this.opts.tunnelBudgetBytes ?? DEFAULT_TUNNEL_BUDGET_BYTES, this.budget), leaseId);
    this.tunnels.set(tunnelId, tunnel);
    return tunnel;
  }

  /** Follows the tunnel's action: once it has settled (or failed to start), the tunnel is gone. */
  track(tunnel: AdbTunnel, run: Promise<unknown>): void {
    // The first stream's open (often the only one: `adb shell CMD`) finds its connection ready too.
    // Selecting the transport reaches only the adb server, not the phone: it may precede the device lock.
    if (this.opts.warmTransport) this.warmFor(tunnel).prepare();
    const fields = () => ({ tunnelId: tunnel.tunnelId, serial: tunnel.serial, actionId: tunnel.actionId });
    void run.then(
      () => this.opts.log?.info("adb tunnel closed", { ...fields(), reason: tunnel.stopReason }),
      (err: unknown) => {
        // One that never started (a busy phone) was refused to its caller; one that ran and failed is worth a warning.
        if (tunnel.actionId) this.opts.log?.warn("adb tunnel ended with an error", { ...fields(), error: (err as Error).message });
        else this.opts.log?.debug("adb tunnel did not open", { ...fields(), error: (err as Error).message });
      },
    ).finally(() => {
      if (this.tunnels.get(tunnel.tunnelId) === tunnel) this.tunnels.delete(tunnel.tunnelId);
      this.spares.get(tunnel)?.close();
      this.spares.delete(tunnel);
      this.warm.get(tunnel)?.close();
      this.warm.delete(tunnel);
      tunnel.finish();
    });
  }

  get(tunnelId: string): AdbTunnel | undefined {
    return this.tunnels.get(tunnelId);
  }

  list(): TunnelInfo[] {
    return [...this.tunnels.values()].map((t) => t.info());
  }

  /** Streams open now in every tunnel. */
  openStreams(): number {
    return this.list().reduce((n, t) => n + t.openStreams, 0);
  }

  /** Bytes relayed each way so far, and the streams open now; undefined for a tunnel not (or no longer) here. */
  bytes(tunnelId: string): TunnelBytes | undefined {
    const t = this.tunnels.get(tunnelId);
    if (!t) return undefined;
    const i = t.info();
    return { toDevice: i.bytesToDevice, fromDevice: i.bytesFromDevice, openStreams: i.openStreams };
  }

  /** Closes a tunnel and waits (until `untilMs`) for its action to settle; an unknown tunnel is a no-op. */
  async stop(tunnelId: string, reason: string, untilMs: number): Promise<void> {
    checkCoordinatorId(tunnelId, "tunnel_id");
    const t = this.tunnels.get(tunnelId);
    if (!t) return;
    t.stop(reason);
    // Still waiting for the device lock: its action ends as soon as it starts; nothing holds the phone yet.
    if (!t.actionId) return;
    await settledBy([t.ended], untilMs);
  }

  /** Closes every tunnel of a lease and waits (until `untilMs`) for their actions to settle. */
  async stopLease(leaseId: string, reason: string, untilMs: number): Promise<void> {
    const ours = [...this.tunnels.values()].filter((t) => t.leaseId === leaseId);
    for (const t of ours) t.stop(reason);
    await settledBy(
      ours.filter((t) => t.actionId).map((t) => t.ended),
      untilMs,
    );
  }

  async stopAll(reason: string, untilMs = Date.now() + 5_000): Promise<void> {
    const all = [...this.tunnels.values()];
    for (const t of all) t.stop(reason);
    await settledBy(
      all.map((t) => t.ended),
      untilMs,
    );
  }

  /** The control stream to the coordinator came up or went down: down, every tunnel closes and none opens until it is back. */
  linkChanged(attached: boolean): void {
    this.linkUp = attached;
    if (!attached && this.tunnels.size > 0) {
      this.opts.log?.warn("the control stream to the coordinator ended: closing every adb tunnel", { tunnels: this.tunnels.size });
      void this.stopAll("the control stream to the coordinator ended");
    }
  }

  /** Refuses a service by name before the phone is touched; each refusal is logged (its rule, never the service: it may hold secrets) and counted. */
  private checkService(tunnelId: string, service: string): void {
    try {
      checkAdbService(service);
    } catch (err) {
      const rule = refusalOf(service)?.rule ?? "not-a-device-service";
      this.opts.log?.warn("adb service refused", { tunnelId, rule, service: serviceKind(service) });
      this.opts.onServiceRefused?.(rule);
      throw err;
    }
  }

  /**
   * Opens `service` on the tunnel's own serial and starts relaying it on
   * ServeAdbStream with this stream id. Resolves once the device accepted
   * the service and the call is started; the device's refusal is the error.
   */
  async openStream(req: { tunnelId: string; streamId: string; service: string }, deadlineMs: number): Promise<void> {
    checkCoordinatorId(req.tunnelId, "tunnel_id");
    checkCoordinatorId(req.streamId, "stream_id");
    this.checkService(req.tunnelId, req.service);
    const t = this.tunnels.get(req.tunnelId);
    if (!t?.running) throw farmError(Errors.TUNNEL_NOT_FOUND, `no open adb tunnel ${req.tunnelId} on this agent`, "tunnel_id");
    if (t.streams.has(req.streamId)) throw farmError(Errors.ALREADY_EXISTS, `adb stream ${req.streamId} is already open in tunnel ${req.tunnelId}`, "stream_id");
    const max = this.opts.maxStreamsPerTunnel ?? MAX_STREAMS_PER_TUNNEL;
    if (t.streams.size >= max) throw farmError(Errors.TUNNEL_LIMIT, `adb tunnel ${req.tunnelId} already has ${max} open streams, the most one tunnel may`, "stream_id");
    // Never across an alias: a serial that now reaches another phone (a reused ip:port) is not the tunnel's phone.
    const now = this.opts.physicalIdOf?.(t.serial);
    if (now !== undefined && now !== t.physicalId) {
      throw farmError(Errors.DEVICE_OFFLINE, `serial ${t.serial} now reaches another phone (${now}), not the tunnel's ${t.physicalId}`);
    }
    const kind = serviceKind(req.service);
    // The remote adb benchmark's marks (stage-trace.ts): the stream's service kind is its id.
    const trace = stageTrace ? `adb:${req.service.slice(0, req.service.indexOf(":") + 1)}` : undefined;
    if (trace) stageTrace?.mark(trace, "agent.start");
    t.streams.set(req.streamId, undefined);
    t.markUsed();
    let opened: OpenService;
    try {
      opened = await this.transportFor(t).open(req.service, AbortSignal.any([AbortSignal.timeout(Math.max(0, deadlineMs - Date.now())), t.signal]));
    } catch (err) {
      t.streams.delete(req.streamId);
      if (!t.open) throw tunnelClosed(t);
      const f = toDispatchFailure(err);
      throw farmError(f.error, `${t.serial} did not open the adb service ${kind}: ${f.message}`);
    }
    // Same tick as the open: the socket is already flowing.
    if (!t.open) {
      opened.socket.destroy();
      t.streams.delete(req.streamId);
      throw tunnelClosed(t);
    }
    if (trace) stageTrace?.mark(trace, "agent.service-okay");
    const relay = relayAdbStream({
      ...(trace ? { trace } : {}),
      streamId: req.streamId,
      socket: opened.socket,
      leftover: opened.leftover,
      serve: this.serveFor(t),
      budget: t.budget,
      onFromDevice: (n) => (t.bytesFromDevice += n),
      onToDevice: (n) => (t.bytesToDevice += n),
    });
    t.streams.set(req.streamId, relay);
    t.streamsOpened += 1;
    this.opts.log?.debug("adb stream opened", { tunnelId: t.tunnelId, streamId: req.streamId, service: kind });
    void relay.done.then(() => {
      if (t.streams.get(req.streamId) === relay) t.streams.delete(req.streamId);
      this.opts.log?.debug("adb stream closed", { tunnelId: t.tunnelId, streamId: req.streamId });
    });
  }

  /** Where a stream of this tunnel opens its service: a fresh connection each time, or the tunnel's warm one. */
  private transportFor(t: AdbTunnel): { open(service: string, signal: AbortSignal): Promise<OpenService> } {
    if (!this.opts.warmTransport) return { open: (service, signal) => openDeviceService(this.opts.adb, t.serial, service, signal) };
    return this.warmFor(t);
  }

  /** The tunnel's warm connection, made on first use. */
  private warmFor(t: AdbTunnel): WarmTransport {
    let warm = this.warm.get(t);
    if (!warm) {
      const own = new WarmTransport(this.opts.adb, t.serial);
      warm = own;
      this.warm.set(t, own);
      // Closing: its spare connection goes, and none is made again.
      t.signal.addEventListener("abort", () => own.close(), { once: true });
    }
    return warm;
  }

  /** How a stream of this tunnel starts its ServeAdbStream call: on the tunnel's spare, when spares are on. */
  private serveFor(t: AdbTunnel): ServeAdbStream {
    if (!this.opts.spareCalls) return this.opts.serve;
    let spares = this.spares.get(t);
    if (!spares) {
      const own = new SpareCalls(this.opts.serve);
      spares = own;
      this.spares.set(t, own);
      // Closing: no spare is opened for it again.
      t.signal.addEventListener("abort", () => own.close(), { once: true });
    }
    const s = spares;
    return (requests, signal) => s.start(requests, signal);
  }

  /** The coordinator ended one stream (its caller went away): cut it here too; one already gone is a no-op. */
  stopStream(req: { tunnelId: string; streamId: string }): void {
    checkCoordinatorId(req.tunnelId, "tunnel_id");
    checkCoordinatorId(req.streamId, "stream_id");
    const relay = this.tunnels.get(req.tunnelId)?.streams.get(req.streamId);
    if (!relay) return;
    this.opts.log?.debug("adb stream stopped by the coordinator", { tunnelId: req.tunnelId, streamId: req.streamId });
    relay.close();
  }
}

function tunnelClosed(t: AdbTunnel): Error {
  return farmError(Errors.TUNNEL_CLOSED, `adb tunnel ${t.tunnelId} closed (${t.stopReason}) while the stream opened`, "tunnel_id");
}

/** Waits for all of `promises`, but not past `untilMs`. */
async function settledBy(promises: Promise<unknown>[], untilMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.allSettled(promises), new Promise((r) => (timer = setTimeout(r, Math.max(0, untilMs - Date.now()))))]);
  clearTimeout(timer);
}
