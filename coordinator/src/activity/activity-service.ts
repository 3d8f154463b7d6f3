import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { ActivityService, ListActivityResponseSchema } from "@farm/shared/gen/farm/v1/activity_service_pb";
import type { ActivityLog } from "./activity-log.js";
import { requirePrincipal } from "../auth/auth.js";
import { activityFor } from "../routing/command-privacy.js";
import type { Summarizer } from "../auth/summary-key.js";
import { activityMessage } from "../watch/messages.js";

export function registerActivityService(router: ConnectRouter, deps: { activity: ActivityLog; summaries: Summarizer }): void {
  router.service(ActivityService, {
    async listActivity(req, ctx) {
      const viewer = requirePrincipal(ctx);
      // The deprecated limit is still a page size for clients that predate paging.
      const pageSize = req.pageSize !== 0 ? req.pageSize : req.limit;
      const page = await deps.activity.listPage({ serial: req.serial, ...(req.since ? { sinceMs: timestampMs(req.since) } : {}) }, { pageSize, pageToken: req.pageToken });
      return create(ListActivityResponseSchema, {
        // Commands, property values and typed text in full only for their caller and admins.
        entries: page.items.map((row) => activityMessage(activityFor(viewer, row, deps.summaries))),
        nextPageToken: page.nextPageToken,
      });
    },
  });
}
