import { randomUUID } from "node:crypto";
import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { Errors, farmError, invalidArgument, toErrorReport } from "@farm/shared/errors";
import { stageTrace } from "@farm/shared/stage-trace";
import type { Logger } from "@farm/shared/log";
import type { Agent } from "@farm/shared/gen/farm/v1/registry_pb";
import { AdbTunnelService, CloseTunnelResponseSchema, ListTunnelsResponseSchema, OpenAdbStreamResponseSchema, OpenTunnelResponseSchema } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { AgentAdbService, ServeAdbStreamResponseSchema } from "@farm/shared/gen/farm/v1/agent_adb_service_pb";
import { AgentControlService } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import type { ActivityLog } from "../activity/activity-log.js";
import { isRevocation } from "../auth/open-calls.js";
import { requirePrincipal } from "../auth/auth.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { LeaseRow } from "../leases/lease-store.js";
import type { Registry } from "../registry/registry.js";
import type { AgentCaller } from "../routing/agent-session.js";
import { routeFor } from "../routing/device-service.js";
import { RemoteAgentSession } from "../replicas/remote-agent-session.js";
import type { AdbStreamRelay } from "./adb-stream-relay.js";
import { openTunnelLink, type TunnelLink } from "./tunnel-link.js";
import { tunnelMessage } from "./tunnel-message.js";
import type { TunnelEntry, Tunnels } from "./tunnels.js";

/** How long the agent has to open a tunnel or a stream (and its stream to arrive). */
const OPEN_TIMEOUT_MS = 15_000;
const KEEPALIVE_MS = 15_000;

export interface AdbTunnelDeps {
  registry: Registry;
  leases: LeaseManager;
  activity: ActivityLog;
  tunnels: Tunnels;
  relay: AdbStreamRelay;
  log: Logger;
}

/** Why a lease's end closes its tunnels, as the CLI will say it. */
function leaseEndError(lease: LeaseRow): Error {
  return lease.state === "expired"
    ? farmError(Errors.LEASE_EXPIRED, `the lease ${lease.leaseId} on ${lease.physicalId} expired: the remote adb tunnel is closed`, "lease")
    : farmError(Errors.LEASE_RELEASED, `the lease ${lease.leaseId} on ${lease.physicalId} was released: the remote adb tunnel is closed`, "lease");
}

/** The agent's caller for a tunnel's phone, as attached now. */
function agentOf(deps: AdbTunnelDeps, t: TunnelEntry): AgentCaller {
  const attached = deps.registry.agentSession(t.agentId);
  if (!attached) throw farmError(Errors.AGENT_OFFLINE, `agent ${t.agentName} is offline`, undefined, { dispatched: false, ambiguous: false });
  return attached.session as AgentCaller;
}

/** Where a tunnel goes: the leased phone, and its agent (here, or through the replica holding it). */
export interface TunnelRoute {
  serial: string;
  physicalId: string;
  agentId: string;
  agentName: string;
  leaseId: string;
  session: AgentCaller;
}

/**
 * Opens a tunnel to a leased phone and holds it: yields the entry once the
 * agent (or, for an agent attached to another replica, that replica:
 * ReplicaService.RelayTunnel) opened it, then a keepalive while idle; ends
 * when `signal` aborts (its reason is why), the lease ends, the agent goes,
 * or nothing used it for the idle limit. Throws why it closed, unless
 * `quiet()` says the caller left on its own. Closing stops it on the agent.
 * `tunnelId` is given when another replica opened the tunnel (and records it).
 */
export async function* holdTunnel(
  deps: AdbTunnelDeps,
  principal: { tokenName: string; admin: boolean },
  r: TunnelRoute,
  opts: { signal: AbortSignal; quiet: () => boolean; tunnelId?: string; record: boolean },
): AsyncGenerator<{ opened: TunnelEntry } | { keepalive: true }> {
  const { signal, quiet } = opts;
  deps.tunnels.checkRoom(principal.tokenName);
  const tunnelId = opts.tunnelId ?? randomUUID();
  const t0 = Date.now();
  const session = r.session;
  let link: TunnelLink | undefined;
  let actionId: string;
  if (session instanceof RemoteAgentSession) {
    link = await openTunnelLink(session, { tunnelId, serial: r.serial, physicalId: r.physicalId, leaseId: r.leaseId, requestedBy: principal.tokenName }, Date.now() + OPEN_TIMEOUT_MS);
    actionId = link.actionId;
  } else {
    ({ actionId } = await session.call(AgentControlService.method.startAdbTunnel, { tunnelId, target: { serial: r.serial, agent: r.agentId }, leaseId: r.leaseId }, principal, Date.now() + OPEN_TIMEOUT_MS));
  }
  let reason: Error | undefined;
  let wake = () => {};
  const entry: TunnelEntry = {
    tunnelId,
    owner: principal.tokenName,
    serial: r.serial,
    physicalId: r.physicalId,
    agentId: r.agentId,
    agentName: r.agentName,
    leaseId: r.leaseId,
    actionId,
    openedAt: t0,
    bytesToDevice: 0,
    bytesFromDevice: 0,
    streams: new Set(),
    lastActive: t0,
    ...(link ? { link } : {}),
    close(err) {
      reason ??= err;
      wake();
    },
  };
  void link?.ended.then((err) => entry.close(err));
  const onLeaseEnded = (lease: LeaseRow) => {
    if (lease.leaseId === entry.leaseId) entry.close(leaseEndError(lease));
  };
  const onAgent = (agent: Agent) => {
    if (agent.id !== entry.agentId) return;
    if (!agent.online) entry.close(farmError(Errors.AGENT_OFFLINE, `agent ${agent.name} went offline: the remote adb tunnel is closed`));
    else if (agent.draining) entry.close(farmError(Errors.AGENT_DRAINING, `agent ${agent.name} is draining (${agent.drainReason || "no reason given"}): the remote adb tunnel is closed`));
  };
  const onAbort = () => entry.close(signal.reason instanceof Error ? signal.reason : farmError(Errors.TUNNEL_CLOSED, "closed by its caller"));
  deps.leases.events.on("leaseEnded", onLeaseEnded);
  deps.registry.events.on("agent", onAgent);
  signal.addEventListener("abort", onAbort, { once: true });
  if (signal.aborted) onAbort();
  deps.tunnels.add(entry);
  let outcome = "ok";
  try {
    yield { opened: entry };
    // The lease may have ended between the check and now (as the database has it, on replicas).
    if ((await deps.leases.storedLeaseOf(entry.physicalId))?.leaseId !== entry.leaseId) entry.close(farmError(Errors.LEASE_RELEASED, `the lease ${entry.leaseId} ended: the remote adb tunnel is closed`, "lease"));
    while (!reason) {
      const idle = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(true), KEEPALIVE_MS);
        wake = () => {
          clearTimeout(timer);
          resolve(false);
        };
      });
      if (reason) break;
      if (idle && entry.streams.size === 0 && Date.now() - entry.lastActive > deps.tunnels.limits.idleMs) {
        entry.close(farmError(Errors.TUNNEL_CLOSED, `no adb stream for ${Math.round(deps.tunnels.limits.idleMs / 60_000)} minutes: the remote adb tunnel is closed`));
        break;
      }
      if (idle) yield { keepalive: true };
    }
    outcome = toErrorReport(reason).code;
    if (!quiet()) throw reason;
  } finally {
    deps.leases.events.off("leaseEnded", onLeaseEnded);
    deps.registry.events.off("agent", onAgent);
    signal.removeEventListener("abort", onAbort);
    const why = reason ?? farmError(Errors.TUNNEL_CLOSED, "closed");
    deps.tunnels.remove(tunnelId, why);
    for (const cut of entry.streams) cut(why);
    if (link) link.close(toErrorReport(why).message);
    else await stopOnAgent(deps, entry, toErrorReport(why).message);
    // Never throws: a failed history write must not replace why the tunnel closed.
    // Recorded once, where the caller's call landed (not again by the replica holding the agent).
    if (opts.record) {
      await deps.activity.recordAfter({
        at: t0,
        caller: principal.tokenName,
        leaseId: entry.leaseId,
        serial: entry.serial,
        physicalId: entry.physicalId,
        agentId: entry.agentId,
        command: "adbTunnel",
        outcome,
        durationMs: Date.now() - t0,
        requestId: "",
        detail: `remote adb: ${entry.bytesToDevice} bytes to the device, ${entry.bytesFromDevice} from it; ${toErrorReport(why).message}`,
      });
    }
  }
}

/**
 * One adb stream in a caller's tunnel: yields "opened" once the device
 * accepted the service, then the device's bytes, then "end" once the
 * phone's side ended with all of them sent, while `incoming` carries the
 * caller's to the device. On a tunnel held through another replica the
 * stream travels over ReplicaService.RelayAdbStream; otherwise the agent
 * joins it here. Ends when either side ends, the tunnel closes, or `signal`
 * aborts (the caller went away); a cut throws instead of saying "end".
 */
export async function* adbStream(
  deps: AdbTunnelDeps,
  principal: { tokenName: string; admin: boolean },
  start: { tunnelId: string; service: string },
  incoming: AsyncIterator<Uint8Array | undefined>,
  signal: AbortSignal,
): AsyncGenerator<{ opened: true } | { data: Uint8Array } | { end: true }> {
  const { tunnelId, service } = start;
  // The remote adb benchmark's marks (stage-trace.ts), once per stream: the stream's service kind is its id.
  const trace = stageTrace ? `adb:${serviceKindOf(service)}` : undefined;
  const marked = new Set<string>();
  const mark = (stage: string) => {
    if (!trace || marked.has(stage)) return;
    marked.add(stage);
    stageTrace?.mark(trace, stage);
  };
  mark("coord.start");
  if (service === "" || service.length > 1024) throw invalidArgument("start.service", "an adb service name of at most 1024 bytes");
  const t = deps.tunnels.own(tunnelId, principal.tokenName);
  if (t.streams.size >= deps.tunnels.limits.streamsPerTunnel) {
    throw farmError(Errors.TUNNEL_LIMIT, `tunnel ${tunnelId} has ${t.streams.size} adb streams open, the most one tunnel may`, "start");
  }
  const streamId = randomUUID();
  let cutBy: Error | undefined;
  const stop = new AbortController();
  const cut = (err: Error) => {
    cutBy ??= err;
    stop.abort(err);
    pair.toAgent.close();
    pair.toCaller.close();
  };
  const pair = t.link ? t.link.openStream(service, principal.tokenName, stop.signal, cut) : deps.relay.open(streamId);
  t.streams.add(cut);
  t.lastActive = Date.now();
  deps.tunnels.touched(t);
  // A caller that goes away ends its stream now, even while the phone reads nothing and sends nothing.
  const onCallerGone = () => cut(farmError(Errors.TUNNEL_CLOSED, "the adb stream's caller went away"));
  signal.addEventListener("abort", onCallerGone, { once: true });
  let started = false;
  /** The phone's side ended and the caller was told: the caller's going away after that cuts nothing. */
  let ended = false;
  try {
    // Through another replica, that replica answers once the device accepted the service.
    mark("coord.ask-agent");
    void pair.joined.then(() => mark("coord.joined"), () => undefined);
    const answer = t.link ? pair.joined : agentOf(deps, t).call(AgentControlService.method.startAdbStream, { tunnelId, streamId, service }, principal, Date.now() + OPEN_TIMEOUT_MS);
    // The agent joins only once the device accepted the service, on a stream of its own that is
    // often quicker than the control stream's answer: whichever comes first opens the stream.
    // An answer that fails after the join cuts it.
    await Promise.race([answer, pair.joined]);
    mark("coord.opened");
    started = true;
    answer.catch((err: unknown) => cut(err instanceof Error ? err : new Error(String(err))));
    // The device accepted the service: the caller hears so now, while the agent's byte stream joins
    // (bytes wait in the queues meanwhile). A join that never comes cuts the stream.
    joinedWithin(pair.joined, stop.signal, signal).catch((err: unknown) => cut(err instanceof Error ? err : new Error(String(err))));
    yield { opened: true };
    // Caller -> device, in the background; the caller's end closes the device's side.
    void (async () => {
      try {
        for (;;) {
          const m = await incoming.next();
          if (m.done || stop.signal.aborted) break;
          if (!m.value) continue;
          mark("coord.from-caller");
          t.bytesToDevice += m.value.length;
          t.lastActive = Date.now();
          deps.tunnels.touched(t);
          await pair.toAgent.push(m.value);
        }
      } catch {
        /* the caller went away */
      }
      pair.toAgent.close();
    })();
    for await (const bytes of pair.toCaller) {
      mark("coord.to-caller");
      t.bytesFromDevice += bytes.length;
      t.lastActive = Date.now();
      deps.tunnels.touched(t);
      yield { data: bytes };
    }
    mark("coord.device-end");
    if (cutBy) throw cutBy;
    // Said as a message: the call's trailers took about twice a message's time to reach the caller,
    // and a short command's output waited for them before its CLSE.
    ended = true;
    yield { end: true };
  } finally {
    signal.removeEventListener("abort", onCallerGone);
    t.streams.delete(cut);
    t.lastActive = Date.now();
    deps.tunnels.touched(t);
    pair.toAgent.close();
    if (t.link) {
      // The relay's end tells the agent's replica, which cuts the stream on the agent.
      if (!ended && (cutBy || signal.aborted)) stop.abort();
    } else {
      deps.relay.forget(streamId);
      // Cut here: the agent may be writing to a phone that reads nothing, where the end of its
      // ServeAdbStream call cannot reach it. Told directly, it closes the phone's side and frees the bytes.
      if (started && !ended && (cutBy || signal.aborted)) void stopStreamOnAgent(deps, t, streamId, principal);
    }
  }
}

/** Remote adb for callers: tunnels bound to a lease, and the adb streams inside them. */
export function registerAdbTunnelService(router: ConnectRouter, deps: AdbTunnelDeps): void {
  router.service(AdbTunnelService, {
    async *openTunnel(req, ctx) {
      const principal = requirePrincipal(ctx);
      const leaseToken = ctx.requestHeader.get("x-farm-lease");
      // No serial: the phone the presented lease is on.
      const serial = req.target?.serial || (leaseToken ? (deps.leases.leaseOfToken(leaseToken)?.serial ?? "") : "");
      if (!serial) throw invalidArgument("target.serial", leaseToken ? "no active lease for the presented lease token; name the device" : "a device serial (or a lease) is required");
      const r = await routeFor(deps, serial, req.target?.agent ?? "", true, leaseToken, { method: AdbTunnelService.method.openTunnel, caller: principal });
      // The caller's cancel closes the tunnel quietly; a revocation closes it with its reason.
      const closing = new AbortController();
      const onAbort = () => closing.abort(isRevocation(ctx.signal.reason) ? (ctx.signal.reason as Error) : farmError(Errors.TUNNEL_CLOSED, "closed by its caller"));
      ctx.signal.addEventListener("abort", onAbort, { once: true });
      if (ctx.signal.aborted) onAbort();
      try {
        const quiet = () => ctx.signal.aborted && !isRevocation(ctx.signal.reason);
        for await (const m of holdTunnel(deps, principal, { ...r, session: r.session as AgentCaller }, { signal: closing.signal, quiet, record: true })) {
          yield "opened" in m ? create(OpenTunnelResponseSchema, { kind: { case: "opened", value: tunnelMessage(m.opened) } }) : create(OpenTunnelResponseSchema, { kind: { case: "keepalive", value: true } });
        }
      } finally {
        ctx.signal.removeEventListener("abort", onAbort);
      }
    },

    async *openAdbStream(requests, ctx) {
      const principal = requirePrincipal(ctx);
      const it = requests[Symbol.asyncIterator]();
      const first = await it.next();
      if (first.done || first.value.kind.case !== "start") throw invalidArgument("start", "the first message must be start");
      const incoming: AsyncIterator<Uint8Array | undefined> = {
        next: async () => {
          const m = await it.next();
          return m.done ? { done: true, value: undefined } : { done: false, value: m.value.kind.case === "data" ? m.value.kind.value : undefined };
        },
      };
      for await (const m of adbStream(deps, principal, first.value.kind.value, incoming, ctx.signal)) {
        if ("opened" in m) yield create(OpenAdbStreamResponseSchema, { kind: { case: "opened", value: true } });
        else if ("end" in m) yield create(OpenAdbStreamResponseSchema, { kind: { case: "end", value: true } });
        else yield create(OpenAdbStreamResponseSchema, { kind: { case: "data", value: m.data } });
      }
    },

    listTunnels(req, ctx) {
      const principal = requirePrincipal(ctx);
      const page = deps.tunnels.listPageFor(principal, { physicalId: req.physicalId, mine: req.mine }, req);
      return create(ListTunnelsResponseSchema, { tunnels: page.items.map(tunnelMessage), nextPageToken: page.nextPageToken });
    },

    closeTunnel(req, ctx) {
      const principal = requirePrincipal(ctx);
      const t = principal.admin ? deps.tunnels.get(req.tunnelId) : deps.tunnels.own(req.tunnelId, principal.tokenName);
      if (!t) throw farmError(Errors.TUNNEL_NOT_FOUND, `no open tunnel ${req.tunnelId}`, "tunnel_id");
      t.close(farmError(Errors.TUNNEL_CLOSED, t.owner === principal.tokenName ? "closed by its owner" : `closed by the admin ${principal.tokenName}`));
      return create(CloseTunnelResponseSchema, {});
    },
  });
}

/** Waits for the agent's stream to join, at most OPEN_TIMEOUT_MS, or until the stream is cut or the caller leaves. */
async function joinedWithin(joined: Promise<void>, cut: AbortSignal, caller: AbortSignal): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const stopped = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(farmError(Errors.COMMAND_TIMEOUT, "the agent's adb stream did not arrive")), OPEN_TIMEOUT_MS);
    const onAbort = (signal: AbortSignal) => () => reject(signal.reason instanceof Error ? signal.reason : farmError(Errors.TUNNEL_CLOSED, "the tunnel closed"));
    cut.addEventListener("abort", onAbort(cut), { once: true });
    caller.addEventListener("abort", onAbort(caller), { once: true });
  });
  stopped.catch(() => undefined);
  try {
    await Promise.race([joined, stopped]);
  } finally {
    clearTimeout(timer);
  }
}

/** Tells the agent the tunnel closed (its action settles, the lock is let go); an agent already gone has let go itself. */
async function stopOnAgent(deps: AdbTunnelDeps, t: TunnelEntry, reason: string): Promise<void> {
  try {
    await agentOf(deps, t).call(AgentControlService.method.stopAdbTunnel, { tunnelId: t.tunnelId, reason }, { tokenName: t.owner, admin: false }, Date.now() + 5_000);
  } catch (err) {
    deps.log.warn("could not tell the agent a remote adb tunnel closed; it closes its tunnels when its coordinator goes", { tunnelId: t.tunnelId, agentId: t.agentId, error: (err as Error).message });
  }
}

/** Tells the agent one stream ended; an agent already gone has cut it itself. */
async function stopStreamOnAgent(deps: AdbTunnelDeps, t: TunnelEntry, streamId: string, principal: { tokenName: string; admin: boolean }): Promise<void> {
  try {
    await agentOf(deps, t).call(AgentControlService.method.stopAdbStream, { tunnelId: t.tunnelId, streamId }, principal, Date.now() + 5_000);
  } catch (err) {
    deps.log.debug("could not tell the agent an adb stream ended; it ends with its tunnel", { tunnelId: t.tunnelId, streamId, error: (err as Error).message });
  }
}

/** The agent's side of one adb stream: joins the stream it was told to open. */
export function registerAgentAdbService(router: ConnectRouter, deps: { relay: AdbStreamRelay }): void {
  router.service(AgentAdbService, {
    async *serveAdbStream(requests) {
      const it = requests[Symbol.asyncIterator]();
      const first = await it.next();
      if (first.done || first.value.kind.case !== "streamId") throw invalidArgument("stream_id", "the first message must be the stream id");
      const pair = deps.relay.claim(first.value.kind.value);
      if (!pair) throw farmError(Errors.NOT_FOUND, "no such adb stream", "stream_id");
      void (async () => {
        try {
          for (;;) {
            const m = await it.next();
            if (m.done) break;
            // Each message is bounded before it is read (message-limits.ts): none is dropped here.
            if (m.value.kind.case === "data") await pair.toCaller.push(m.value.kind.value);
          }
        } catch {
          /* the agent's side ended */
        }
        pair.toCaller.close();
      })();
      for await (const bytes of pair.toAgent) yield create(ServeAdbStreamResponseSchema, { kind: { case: "data", value: bytes } });
    },
  });
}

/** The service's kind for the benchmark's marks ("shell,v2,raw:", "sync:"): never the command. */
function serviceKindOf(service: string): string {
  const colon = service.indexOf(":");
  return colon < 0 ? service.slice(0, 40) : service.slice(0, colon + 1);
}
