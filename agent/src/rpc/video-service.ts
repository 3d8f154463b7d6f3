import type { ServiceImpl } from "@connectrpc/connect";
import { Errors, farmError } from "@farm/shared/errors";
import type { VideoService } from "@farm/shared/gen/farm/v1/video_service_pb";
import { callContext } from "./call-context.js";
import type { AgentServiceDeps } from "./service-deps.js";

/**
 * VideoService on this agent: its recordings. Listing sessions is the
 * coordinator's (from its index); the agent serves the rest.
 */
export function agentVideoService(deps: Pick<AgentServiceDeps, "video">): Omit<ServiceImpl<typeof VideoService>, "listVideoSessions"> {
  return {
    async startVideo(req, ctx) {
      return { session: await deps.video.start(req, callContext(ctx).deadlineMs) };
    },
    async getVideoStatus(req) {
      return { session: await deps.video.status(req.sessionId) };
    },
    async stopVideo(req, ctx) {
      const c = callContext(ctx);
      return { session: await deps.video.stop(req.sessionId, c.requestedBy, c.deadlineMs) };
    },
    inspectVideo(req) {
      return deps.video.inspect(req.sessionId);
    },
    async releaseVideo(req, ctx) {
      const c = callContext(ctx);
      if (!c.admin) throw farmError(Errors.PERMISSION_DENIED, "releasing a recording lock needs an admin token");
      return deps.video.release(req.sessionId, c.requestedBy, req.reason);
    },
  };
}
