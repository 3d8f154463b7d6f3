import { randomUUID } from "node:crypto";
import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { AgentControlService } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { AgentScreenService } from "@farm/shared/gen/farm/v1/agent_screen_service_pb";
import { LiveScreenService, WatchScreenResponseSchema } from "@farm/shared/gen/farm/v1/live_screen_service_pb";
import { requirePrincipal } from "../auth/auth.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { LeaseRow } from "../leases/lease-store.js";
import type { Registry } from "../registry/registry.js";
import type { AgentCaller } from "../routing/agent-session.js";
import { routeFor } from "../routing/device-service.js";
import { RemoteAgentSession } from "../replicas/remote-agent-session.js";
import { ScreenFeed, ScreenViewer, type ScreenItem } from "./screen-feed.js";
import { relayScreen } from "./screen-relay.js";

/** How long the agent has to start streaming a phone's screen. */
const START_TIMEOUT_MS = 15_000;
/** A feed nobody watches is kept this long, so a reloaded page does not restart the phone's encoder. */
const LINGER_MS = 3_000;

/** One phone's feed as this replica streams it: from its agent, or relayed from the replica holding the agent. */
export interface Running {
  physicalId: string;
  feed: ScreenFeed;
  streamId: string;
  /** Ends the agent's ServeScreen call (and so its screenrecord). */
  stop: AbortController;
  joined: boolean;
  linger?: NodeJS.Timeout;
}

/** The live screens being streamed, one per phone, by physical id; and by stream id until the agent joins. */
export class ScreenFeeds {
  private readonly byPhone = new Map<string, Running>();
  private readonly byStream = new Map<string, Running>();
  /** Resynchronizations of viewers that have left. */
  private pastResyncs = 0;

  constructor(private readonly log: Logger) {}

  /** The phone's running feed, or a new one started by `start` (on its agent, or through the replica holding it). */
  async feedFor(physicalId: string, start: (r: Running) => Promise<void>): Promise<Running> {
    const running = this.byPhone.get(physicalId);
    if (running) {
      clearTimeout(running.linger);
      running.linger = undefined;
      return running;
    }
    const r: Running = { physicalId, feed: new ScreenFeed(), streamId: randomUUID(), stop: new AbortController(), joined: false };
    this.byPhone.set(physicalId, r);
    this.byStream.set(r.streamId, r);
    const timer = setTimeout(() => {
      if (!r.joined) this.end(physicalId, r, farmError(Errors.COMMAND_TIMEOUT, "the agent did not start the live screen in time"));
    }, START_TIMEOUT_MS);
    timer.unref();
    r.stop.signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
    try {
      await start(r);
    } catch (err) {
      this.end(physicalId, r, err instanceof Error ? err : new Error(String(err)));
      throw err;
    }
    return r;
  }

  /** The agent's ServeScreen call for a stream id; each joins once. */
  claim(streamId: string): Running | undefined {
    const r = this.byStream.get(streamId);
    if (!r || r.joined) return undefined;
    r.joined = true;
    this.byStream.delete(streamId);
    return r;
  }

  /** A viewer left: the last one lets the feed go after a short while. */
  left(physicalId: string, r: Running, viewer: ScreenViewer): void {
    this.pastResyncs += viewer.resyncs;
    if (r.feed.leave(viewer) > 0 || this.byPhone.get(physicalId) !== r) return;
    r.linger = setTimeout(() => {
      if (r.feed.viewerCount === 0) this.end(physicalId, r, null);
    }, LINGER_MS);
    r.linger.unref();
  }

  /** Ends a feed: its viewers' streams and the agent's call. */
  end(physicalId: string, r: Running, err: Error | null): void {
    if (this.byPhone.get(physicalId) === r) this.byPhone.delete(physicalId);
    this.byStream.delete(r.streamId);
    clearTimeout(r.linger);
    r.feed.end(err);
    r.stop.abort();
    if (err) this.log.info("live screen ended", { physicalId, error: err.message });
  }

  /** For metrics: phones streamed now, their viewers, the bytes waiting for those, and resynchronizations so far. */
  stats(): { phones: number; viewers: number; queuedBytes: number; resyncs: number } {
    const all = { phones: this.byPhone.size, viewers: 0, queuedBytes: 0, resyncs: this.pastResyncs };
    for (const r of this.byPhone.values()) {
      const s = r.feed.stats();
      all.viewers += s.viewers;
      all.queuedBytes += s.queuedBytes;
      all.resyncs += s.resyncs;
    }
    return all;
  }

  endAll(): void {
    for (const [physicalId, r] of [...this.byPhone]) this.end(physicalId, r, farmError(Errors.COORDINATOR_UNAVAILABLE, "the coordinator is stopping"));
  }
}

export interface LiveScreenDeps {
  registry: Registry;
  leases: LeaseManager;
  feeds: ScreenFeeds;
}

/** Why a lease's end ends a live screen. */
function leaseEnded(lease: LeaseRow): Error {
  return farmError(lease.state === "expired" ? Errors.LEASE_EXPIRED : Errors.LEASE_RELEASED, `the lease on ${lease.physicalId} ended: the live screen is closed`, "lease");
}

/** Where a watched phone is: its serial and physical id, and the agent holding it (here, or through another replica). */
export interface ScreenRoute {
  agentId: string;
  agentName: string;
  serial: string;
  physicalId: string;
  session: AgentCaller;
}

/**
 * One viewer of a phone's screen: joins the phone's one feed on this
 * replica (started on first use: on the agent when its stream is here,
 * else relayed once per phone from the replica holding it), and ends with
 * `lease` unless the viewer is an admin.
 */
export async function* watchFeed(deps: LiveScreenDeps, r: ScreenRoute, principal: { tokenName: string; admin: boolean }, lease: LeaseRow | undefined, signal: AbortSignal, thumbnail = false): AsyncGenerator<ScreenItem> {
  const session = r.session;
  const running = await deps.feeds.feedFor(r.physicalId, async (feed) => {
    if (session instanceof RemoteAgentSession) return relayScreen(deps.feeds, session, feed, { serial: r.serial, physicalId: r.physicalId, leaseId: lease?.leaseId ?? "", principal });
    await session.call(AgentControlService.method.startScreen, { target: { serial: r.serial, agent: r.agentId }, streamId: feed.streamId }, principal, Date.now() + START_TIMEOUT_MS);
  });
  // A thumbnail viewer takes only key frames of the shared feed (the devices grid).
  const viewer = new ScreenViewer(thumbnail);
  // The holder's view ends with their lease (an admin's does not).
  const onLeaseEnded = (ended: LeaseRow) => {
    if (!principal.admin && ended.leaseId === lease?.leaseId) viewer.end(leaseEnded(ended));
  };
  const onAbort = () => viewer.end(null);
  deps.leases.events.on("leaseEnded", onLeaseEnded);
  signal.addEventListener("abort", onAbort, { once: true });
  running.feed.join(viewer);
  try {
    // The lease may have ended while the feed started (as the database has it: on a replica, a lease granted
    // through another one may not have reached this one's memory yet).
    if (lease && !principal.admin && (await deps.leases.storedLeaseOf(r.physicalId))?.leaseId !== lease.leaseId) viewer.end(leaseEnded({ ...lease, state: "released" }));
    yield* viewer;
  } finally {
    deps.leases.events.off("leaseEnded", onLeaseEnded);
    signal.removeEventListener("abort", onAbort);
    deps.feeds.left(r.physicalId, running, viewer);
  }
}

/** Viewers: the lease holder on that phone, or an admin. */
export function registerLiveScreenService(router: ConnectRouter, deps: LiveScreenDeps): void {
  router.service(LiveScreenService, {
    async *watchScreen(req, ctx) {
      const principal = requirePrincipal(ctx);
      const serial = req.target?.serial ?? "";
      if (!serial) throw invalidArgument("target.serial", "a device serial is required");
      const leaseToken = ctx.requestHeader.get("x-farm-lease");
      // Someone else's screen is theirs (lease_holder_only): only its lease holder, or an admin, sees it.
      const r = await routeFor(deps, serial, req.target?.agent ?? "", false, leaseToken, { method: LiveScreenService.method.watchScreen, caller: principal });
      const lease = deps.leases.leaseOf(r.physicalId);
      // And a free phone's live screen is for whoever leases it, not for every viewer.
      if (!principal.admin && !lease) throw farmError(Errors.LEASE_REQUIRED, `the live screen of ${serial} is for its lease holder; lease it first (farm lease acquire)`, "lease");
      for await (const kind of watchFeed(deps, { ...r, session: r.session as AgentCaller }, principal, lease, ctx.signal, req.thumbnail)) yield create(WatchScreenResponseSchema, { event: { kind } });
    },
  });
}

/** The agent's side: joins the feed it was told to start and publishes what it sends. */
export function registerAgentScreenService(router: ConnectRouter, deps: { feeds: ScreenFeeds }): void {
  router.service(AgentScreenService, {
    async *serveScreen(requests, ctx) {
      const it = requests[Symbol.asyncIterator]();
      const first = await it.next();
      if (first.done || first.value.kind.case !== "streamId") throw invalidArgument("stream_id", "the first message must be the stream id");
      const running = deps.feeds.claim(first.value.kind.value);
      if (!running) throw farmError(Errors.NOT_FOUND, "no such live screen", "stream_id");
      const stopped = running.stop.signal;
      const pump = (async () => {
        try {
          for (;;) {
            const m = await it.next();
            if (m.done || stopped.aborted) break;
            if (m.value.kind.case === "event") running.feed.publish(m.value.kind.value);
          }
          if (!stopped.aborted) deps.feeds.end(running.physicalId, running, farmError(Errors.DEVICE_OFFLINE, "the phone's screen stream ended"));
        } catch {
          deps.feeds.end(running.physicalId, running, farmError(Errors.AGENT_OFFLINE, "the agent's screen stream was lost"));
        }
      })();
      // Nothing goes to the agent: the call stays open until the feed stops (or the agent leaves).
      await new Promise<void>((resolve) => {
        if (stopped.aborted || ctx.signal.aborted) return resolve();
        stopped.addEventListener("abort", () => resolve(), { once: true });
        ctx.signal.addEventListener("abort", () => resolve(), { once: true });
      });
      if (!stopped.aborted) deps.feeds.end(running.physicalId, running, farmError(Errors.AGENT_OFFLINE, "the agent's screen stream was lost"));
      // The pump ends with the call.
      void pump;
    },
  });
}
