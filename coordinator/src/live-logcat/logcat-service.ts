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
import { serveAgentFeed } from "../live-feeds/serve-agent-feed.js";
import { liveFeedStarter } from "../live-feeds/start-live-feed.js";
import { watchRoute } from "../live-feeds/watch-route.js";
import { watchLiveFeed } from "../live-feeds/watch-live-feed.js";

/** Lines the agent may send in one message (it sends at most 256). */
const AGENT_BATCH_MAX_LINES = 1_000;

export interface LogcatServiceDeps {
  registry: Registry;
  leases: LeaseManager;
  feeds: LogcatFeeds;
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
export function watchLogcatFeed(
  deps: LogcatServiceDeps,
  r: LogcatRoute,
  principal: { tokenName: string; admin: boolean },
  lease: LeaseRow | undefined,
  signal: AbortSignal,
): AsyncGenerator<LogBatch> {
  const start = liveFeedStarter(deps.feeds, r, principal, lease?.leaseId ?? "", {
    relay: {
      open: (client, req, signal) => client.relayLogcat(req, { signal }),
      apply: (feed, res) => {
        feed.missed(res.dropped);
        feed.publish(res.lines);
      },
    },
    onAgent: (session, req, by, deadlineMs) => session.call(AgentControlService.method.startLogcat, req, by, deadlineMs),
    timeoutMs: LOGCAT_START_TIMEOUT_MS,
  });
  return watchLiveFeed(deps.feeds, deps.leases, r.physicalId, start, new LogcatViewer(), principal, lease, signal);
}

/** Readers: the lease holder on that phone, or an admin (as for the live screen). */
export function registerLogcatService(router: ConnectRouter, deps: LogcatServiceDeps): void {
  router.service(LogcatService, {
    async *watchLogcat(req, ctx) {
      const { principal, route, lease } = await watchRoute(deps, req.target, ctx, LogcatService.method.watchLogcat, "live logcat");
      for await (const batch of watchLogcatFeed(deps, route, principal, lease, ctx.signal)) yield create(WatchLogcatResponseSchema, batch);
    },
  });
}

/** The agent's side: joins the feed it was told to start and publishes the lines it sends. */
export function registerAgentLogcatService(router: ConnectRouter, deps: { feeds: LogcatFeeds }): void {
  router.service(AgentLogcatService, {
    async *serveLogcat(requests, ctx) {
      await serveAgentFeed(deps.feeds, requests, ctx.signal, {
        streamIdOf: (m) => (m.kind.case === "streamId" ? m.kind.value : undefined),
        publish: (feed, m) => {
          if (m.kind.case !== "lines") return;
          const lines = m.kind.value.lines;
          // Trust nothing across the boundary: a batch past the agent's own cap ends the feed.
          if (lines.length > AGENT_BATCH_MAX_LINES) throw new Error("batch too large");
          feed.publish(lines);
        },
        ended: "the phone's logcat ended",
        lost: "the agent's logcat stream was lost",
      });
    },
  });
}
