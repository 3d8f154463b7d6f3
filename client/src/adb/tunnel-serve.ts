import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { farmTransport } from "@farm/shared/farm-transport";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import { Errors, farmError, toErrorReport, type ErrorReport } from "@farm/shared/errors";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { AdbTunnelService, type OpenTunnelResponse, type Tunnel } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { DeviceTargetSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import { FarmError } from "../farm-error.js";
import { isConnectionLost, isConnectionRefused } from "../coordinator-lost.js";
import type { ClientConfig } from "../config.js";
import { probeBanner, UNKNOWN_DEVICE } from "./adb-banner.js";
import { adbConnect, adbDisconnect, serverSocketOf, type LocalAdb } from "./local-adb-cli.js";
import { startLocalAdbd, type LocalAdbd } from "./local-adbd.js";
import { processStart, removeTunnelState, writeTunnelState } from "./tunnel-state.js";
import { openTunnelStream, tunnelStreamCalls } from "./tunnel-stream.js";
import { ADB_STREAM_WINDOW_BYTES } from "@farm/shared/http2-windows";
import { noStandaloneNote } from "../no-standalone.js";

/** What `farm adb connect` prints. */
export interface ConnectResult {
  /** The local adb serial: 127.0.0.1:PORT. */
  serial: string;
  /** The phone's serial on its agent. */
  device: string;
  tunnel: string;
  lease: string;
  agent: string;
  physicalId: string;
}

export interface ServeParams {
  config: ClientConfig;
  /** The lease token presented (x-farm-lease). */
  leaseToken: string | undefined;
  /** --device (or FARM_DEVICE); without it, the lease's device. */
  serial: string | undefined;
  agent: string | undefined;
  /** Local port: 0 for any free one. */
  port: number;
  adb: LocalAdb;
  /** Deadline of each step of setting up (opening the tunnel, the first stream). */
  timeoutMs: number;
  env: NodeJS.ProcessEnv;
  foreground: boolean;
  logFile: string | null;
  /** SIGINT/SIGTERM: close the tunnel and exit 0. */
  stopSignal: AbortSignal;
  log: (line: string) => void;
  /** Called once the local adb server lists the phone. */
  onReady: (result: ConnectResult) => void;
}

export interface ServeOutcome {
  /** The process exit code: 0 when stopped on request, 1 when the tunnel closed. */
  code: number;
  result: ConnectResult;
  /** Why the tunnel closed, when the farm closed it (undefined: stopped on request). */
  reason?: ErrorReport;
}

/** HTTP/2 pings on the tunnel's connection: a coordinator that vanished is noticed within two intervals. */
const PING_INTERVAL_MS = 10_000;

/**
 * `farm adb connect`'s work, in the foreground or in its background
 * process: opens the tunnel, serves the local adbd endpoint, `adb connect`s
 * the user's adb server to it, and holds it until the farm closes the tunnel
 * (the lease ended, the token was revoked, the agent left, an admin closed
 * it) or the user stops it. Either way the endpoint closes at once, the adb
 * server forgets the phone (`adb disconnect`) and the state file goes.
 */
export async function serveTunnel(p: ServeParams): Promise<ServeOutcome> {
  if (!p.config.token) throw new FarmError(Errors.UNAUTHENTICATED, "no token: pass --token-file, set FARM_TOKEN, put a token in the config file, or run `farm standalone` locally", "token");
  const transportOptions = {
    url: p.config.coordinator,
    token: p.config.token,
    caFile: p.config.caFile,
    insecure: p.config.insecure,
    ...(p.leaseToken ? { headers: { "x-farm-lease": p.leaseToken } } : {}),
    pingIntervalMs: PING_INTERVAL_MS,
    interceptors: [explainUnreachable(p.config)],
    ...(p.config.connections ? { track: (m: Http2SessionManager) => p.config.connections?.track(m) } : {}),
  };
  const client = createClient(AdbTunnelService, farmTransport(transportOptions));
  // The adb streams on a connection of their own, whose windows (both ends: the coordinator
  // narrows a connection whose first call is an adb stream) bound what a stalled stream holds.
  const streams = tunnelStreamCalls(createClient(AdbTunnelService, farmTransport({ ...transportOptions, streamWindowBytes: ADB_STREAM_WINDOW_BYTES })));
  const target = resolveTarget(p);

  const call = new AbortController();
  const events = client.openTunnel({ target: create(DeviceTargetSchema, target) }, { signal: call.signal })[Symbol.asyncIterator]();
  let endpoint: LocalAdbd | undefined;
  let adbAsked = false;
  let tunnel: Tunnel | undefined;
  const cleanUp = async () => {
    streams.close();
    await endpoint?.close();
    call.abort();
    if (adbAsked && endpoint) {
      const failed = await adbDisconnect(p.adb, endpoint.serial);
      if (failed) p.log(`adb disconnect ${endpoint.serial}: ${failed}`);
    }
    if (tunnel) await removeTunnelState(p.env, tunnel.tunnelId).catch(() => undefined);
  };

  let ended: Promise<ErrorReport>;
  try {
    tunnel = await withDeadline(firstOpened(events), p.timeoutMs, p.stopSignal, "the coordinator did not open the tunnel");
    const opened = tunnel;
    // From here on, the rest of the stream is the tunnel's life: keepalives, then its end and why.
    ended = drainUntilClosed(events, p.config);
    const openStream = (service: string) => openTunnelStream(streams, opened.tunnelId, service);
    const banner = await probeBanner(openStream, p.timeoutMs).catch((err: unknown) => {
      p.log(`could not read the phone's properties (${toErrorReport(err).message}); it shows as a phone without shell v2`);
      return UNKNOWN_DEVICE;
    });
    endpoint = await startLocalAdbd({ port: p.port, banner, openStream, log: p.log }).catch((err: NodeJS.ErrnoException) => {
      throw err.code === "EADDRINUSE" ? new FarmError(Errors.INVALID_ARGUMENT, `--port ${p.port} is in use on 127.0.0.1; pick another, or 0 for any free one`, "port") : err;
    });
    adbAsked = true;
    await adbConnect(p.adb, endpoint.serial);
    await writeTunnelState(p.env, {
      tunnelId: opened.tunnelId,
      serial: endpoint.serial,
      port: endpoint.port,
      device: opened.serial,
      agent: opened.agentName,
      physicalId: opened.physicalId,
      leaseId: opened.leaseId,
      coordinator: p.config.coordinator,
      adbServerPort: p.adb.serverPort ?? null,
      adbServerSocket: p.adb.serverSocket ?? serverSocketOf(p.env),
      pid: process.pid,
      pidStart: processStart(process.pid),
      foreground: p.foreground,
      startedAt: new Date().toISOString(),
      log: p.logFile,
    });
  } catch (err) {
    await cleanUp();
    throw err;
  }

  const result: ConnectResult = { serial: endpoint.serial, device: tunnel.serial, tunnel: tunnel.tunnelId, lease: tunnel.leaseId, agent: tunnel.agentName, physicalId: tunnel.physicalId };
  p.onReady(result);
  p.log(`serving ${tunnel.serial} (${tunnel.physicalId} on ${tunnel.agentName}) as ${endpoint.serial}, tunnel ${tunnel.tunnelId}`);

  const stopped = new Promise<"stopped">((resolve) => {
    if (p.stopSignal.aborted) resolve("stopped");
    else p.stopSignal.addEventListener("abort", () => resolve("stopped"), { once: true });
  });
  const outcome = await Promise.race([ended, stopped]);
  await cleanUp();
  return outcome === "stopped" ? { code: 0, result } : { code: 1, result, reason: outcome };
}

/** A coordinator that cannot be reached, said as the CLI's other commands say it (client.ts). */
function explainUnreachable(config: ClientConfig): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      const raw = ConnectError.from(err).rawMessage;
      if (!isConnectionRefused(raw)) throw err;
      throw farmError(Errors.COORDINATOR_UNAVAILABLE, `cannot reach the coordinator at ${config.coordinator} (from ${config.coordinatorSource}): ${raw}${noStandaloneNote(config)}`, "coordinator");
    }
  };
}

/** --device; else the coordinator opens the tunnel on the phone the presented lease is on. */
function resolveTarget(p: ServeParams): { serial: string; agent: string } {
  if (p.serial) return { serial: p.serial, agent: p.agent ?? "" };
  if (!p.leaseToken) throw new FarmError(Errors.INVALID_ARGUMENT, "--device or --lease is required (or FARM_DEVICE / FARM_LEASE)", "device");
  return { serial: "", agent: p.agent ?? "" };
}

async function firstOpened(events: AsyncIterator<OpenTunnelResponse>): Promise<Tunnel> {
  for (;;) {
    const next = await events.next();
    if (next.done) throw farmError(Errors.TUNNEL_CLOSED, "the coordinator ended the tunnel before opening it");
    if (next.value.kind.case === "opened") return next.value.kind.value;
  }
}

/**
 * Resolves (never rejects) with why the tunnel's stream ended. A stream cut
 * without a word from the coordinator (its process died, the connection
 * dropped, the pings went unanswered) is the coordinator being unavailable.
 */
async function drainUntilClosed(events: AsyncIterator<OpenTunnelResponse>, config: ClientConfig): Promise<ErrorReport> {
  try {
    for (;;) {
      const next = await events.next();
      if (next.done) return toErrorReport(farmError(Errors.TUNNEL_CLOSED, "the coordinator ended the tunnel"));
    }
  } catch (err) {
    const ce = ConnectError.from(err);
    const fromCoordinator = ce.findDetails(ErrorDetailSchema).length > 0;
    if (!fromCoordinator && (ce.code === Code.Unavailable || isConnectionLost(ce.rawMessage) || isConnectionRefused(ce.rawMessage))) {
      return toErrorReport(farmError(Errors.COORDINATOR_UNAVAILABLE, `lost the coordinator at ${config.coordinator}: ${ce.rawMessage}`, "coordinator"));
    }
    return toErrorReport(err);
  }
}

async function withDeadline<T>(p: Promise<T>, ms: number, stop: AbortSignal, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort = () => {};
  const failed = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(farmError(Errors.DEADLINE_EXCEEDED, `${what} within ${ms} ms`)), ms);
    onAbort = () => reject(new FarmError(Errors.TUNNEL_CLOSED, "stopped before the tunnel opened"));
    if (stop.aborted) onAbort();
    else stop.addEventListener("abort", onAbort, { once: true });
  });
  p.catch(() => undefined);
  try {
    return await Promise.race([p, failed]);
  } finally {
    clearTimeout(timer);
    stop.removeEventListener("abort", onAbort);
  }
}
