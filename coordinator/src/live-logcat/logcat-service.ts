import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import { AgentControlService } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { AgentLogcatService } from "@farm/shared/gen/farm/v1/agent_logcat_service_pb";
import { LogcatService, WatchLogcatResponseSchema } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import { requirePrincipal } from "../auth/auth.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { LeaseRow } from "../leases/lease-store.js";
import type { Registry } from "../registry/registry.js";
import type { AgentCaller } from "../routing/agent-session.js";
import { routeFor } from "../routing/device-service.js";
import { RemoteAgentSession } from "../replicas/remote-agent-session.js";
import { LogcatViewer, type LogBatch } from "./logcat-feed.js";
import { LOGCAT_START_TIMEOUT_MS, type LogcatFeeds } from "./logcat-feeds.js";
import { relayLogcat } from "./logcat-relay.js";

/** Lines the agent may send in one message (it sends at most 256). */
const AGENT_BATCH_MAX_LINES = 1_000;

export interface LogcatServiceDeps {
  registry: Registry;
  leases: LeaseManager;
  feeds: LogcatFeeds;
}

function leaseEnded(lease: LeaseRow): Error {
  return farmError(lease.state === "expired" ? Errors.LEASE_EXPIRED : Errors.LEASE_RELEASED, `the lease on ${lease.physicalId} ended: the live logcat is closed`, "lease");
}

/** Where a read phone is: its serial and physical id, and the agent holding it (here, or through another replica). */
export interface LogcatRoute {
  agentId: string;
  serial: string;
  physicalId: string;
  session: AgentCaller;
}

/**
 * One reader of a phone's log: joins the phone's one feed on this replica
 * (started on first use: on the agent when its stream is here, else
 * relayed once per phone from the replica holding it), and ends with
 * `lease` unless the reader is an admin.
 */
export async function* watchLogcatFeed(
  deps: LogcatServiceDeps,
  r: LogcatRoute,
  principal: { tokenName: string; admin: boolean },
  lease: LeaseRow | undefined,
  signal: AbortSignal,
): AsyncGenerator<LogBatch> {
  const session = r.session;
  const running = await deps.feeds.feedFor(r.physicalId, async (streamId) => {
    if (session instanceof RemoteAgentSession) return relayLogcat(deps.feeds, session, streamId, { serial: r.serial, physicalId: r.physicalId, leaseId: lease?.leaseId ?? "", principal });
    await session.call(AgentControlService.method.startLogcat, { target: { serial: r.serial, agent: r.agentId }, streamId }, principal, Date.now() + LOGCAT_START_TIMEOUT_MS);
  });
  const viewer = new LogcatViewer();
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

/** Readers: the lease holder on that phone, or an admin (as for the live screen). */
export function registerLogcatService(router: ConnectRouter, deps: LogcatServiceDeps): void {
  router.service(LogcatService, {
    async *watchLogcat(req, ctx) {
      const principal = requirePrincipal(ctx);
      const serial = req.target?.serial ?? "";
      if (!serial) throw invalidArgument("target.serial", "a device serial is required");
      const leaseToken = ctx.requestHeader.get("x-farm-lease");
      // Someone else's log is theirs (lease_holder_only): only its lease holder, or an admin, reads it.
      const r = await routeFor(deps, serial, req.target?.agent ?? "", false, leaseToken, { method: LogcatService.method.watchLogcat, caller: principal });
      const lease = deps.leases.leaseOf(r.physicalId);
      // And a free phone's live log is for whoever leases it, not for every viewer.
      if (!principal.admin && !lease) throw farmError(Errors.LEASE_REQUIRED, `the live logcat of ${serial} is for its lease holder; lease it first (farm lease acquire)`, "lease");
      for await (const batch of watchLogcatFeed(deps, { ...r, session: r.session as AgentCaller }, principal, lease, ctx.signal)) yield create(WatchLogcatResponseSchema, batch);
    },
  });
}

/** The agent's side: joins the feed it was told to start and publishes the lines it sends. */
export function registerAgentLogcatService(router: ConnectRouter, deps: { feeds: LogcatFeeds }): void {
  router.service(AgentLogcatService, {
    async *serveLogcat(requests, ctx) {
      const it = requests[Symbol.asyncIterator]();
      const first = await it.next();
      if (first.done || first.value.kind.case !== "streamId") throw invalidArgument("stream_id", "the first message must be the stream id");
      const running = deps.feeds.claim(first.value.kind.value);
      if (!running) throw farmError(Errors.NOT_FOUND, "no such live logcat", "stream_id");
      const stopped = running.stop.signal;
      void (async () => {
        try {
          for (;;) {
            const m = await it.next();
            if (m.done || stopped.aborted) break;
            if (m.value.kind.case !== "lines") continue;
            const lines = m.value.kind.value.lines;
            // Trust nothing across the boundary: a batch past the agent's own cap ends the feed.
            if (lines.length > AGENT_BATCH_MAX_LINES) throw new Error("batch too large");
            running.feed.publish(lines);
          }
          if (!stopped.aborted) deps.feeds.end(running.physicalId, running, farmError(Errors.DEVICE_OFFLINE, "the phone's logcat ended"));
        } catch {
          deps.feeds.end(running.physicalId, running, farmError(Errors.AGENT_OFFLINE, "the agent's logcat stream was lost"));
        }
      })();
      // Nothing goes to the agent: the call stays open until the feed stops (or the agent leaves).
      await new Promise<void>((resolve) => {
        if (stopped.aborted || ctx.signal.aborted) return resolve();
        stopped.addEventListener("abort", () => resolve(), { once: true });
        ctx.signal.addEventListener("abort", () => resolve(), { once: true });
      });
      if (!stopped.aborted) deps.feeds.end(running.physicalId, running, farmError(Errors.AGENT_OFFLINE, "the agent's logcat stream was lost"));
    },
  });
}
