import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { Errors } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { ActivityService } from "@farm/shared/gen/farm/v1/activity_service_pb";
import { allPages } from "@farm/client/all-pages";
import { serviceClient } from "@farm/client/transport";
import { parseDuration } from "../duration.js";
import { table } from "../output.js";
import { clientSession } from "../session.js";
import type { activityOptions } from "../tree/misc-commands.js";
import type { Action } from "../tree/spec.js";

/** `farm activity`: routed actions, newest first. */
export const activity: Action<typeof activityOptions> = async (input) => {
  const { opts, ctx } = input;
  const session = clientSession(input);
  const sinceText = opts.since;
  let since: number | undefined;
  if (sinceText) {
    since = /^\d{4}-/.test(sinceText) ? Date.parse(sinceText) : Date.now() - parseDuration(sinceText, "since");
    if (!Number.isFinite(since)) throw new CliError(Errors.INVALID_ARGUMENT, `--since must be a duration or an ISO time, got "${sinceText}"`, "since");
  }
  const client = serviceClient(ActivityService, session.config);
  const filter = { serial: opts.device ?? "", ...(since !== undefined ? { since: timestampFromMs(since) } : {}) };
  // Newest first, across pages, until --limit entries.
  const rows = await allPages(
    async (page) => {
      const res = await client.listActivity({ ...filter, ...page }, { timeoutMs: session.timeoutMs });
      return { items: res.entries, nextPageToken: res.nextPageToken };
    },
    { limit: opts.limit ?? 200 },
  );
  const entries = rows.map((e) => ({
    id: Number(e.id),
    time: e.time ? new Date(timestampMs(e.time)).toISOString() : null,
    caller: e.caller,
    leaseId: e.leaseId,
    serial: e.serial,
    physicalId: e.physicalId,
    agentId: e.agentId,
    command: e.command,
    outcome: e.outcome,
    durationMs: e.durationMs,
    requestId: e.requestId,
    detail: e.detail,
  }));
  ctx.printer.result({ entries }, () => table(["TIME", "CALLER", "DEVICE", "COMMAND", "OUTCOME", "MS", "DETAIL"], entries.map((e) => [e.time ?? "", e.caller, e.serial, e.command, e.outcome, String(e.durationMs), e.detail])));
  return 0;
};
