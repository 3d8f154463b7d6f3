import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { toCommandError } from "@farm/shared/command-error";
import { toErrorReport } from "@farm/shared/errors";
import type { Redactor } from "@farm/shared/redaction/redactor";
import { StepAttemptReportSchema, type AgentCall, type StepAttemptReport } from "@farm/shared/gen/farm/v1/agent_service_pb";

/**
 * In a session step: where a handler reports attempts it made itself and
 * gave up on before its result (a rediscovered app endpoint), so the
 * timeline shows them. Null outside a step.
 */
export const stepAttempts = createContextKey<StepAttemptReport[] | null>(null);

/** In a session step with secrets: masks what the agent journals (a shell command's text). Null otherwise. */
export const stepRedactor = createContextKey<Redactor | null>(null);

/** Who asked for a routed call and by when, as the agent's services see it. */
export interface CallContext {
  commandId: string;
  /** Token name of the caller (for the journal and audit log; never a secret). */
  requestedBy: string;
  admin: boolean;
  /** Absolute deadline (ms since the epoch) the work must fit in. */
  deadlineMs: number;
}

/** A call without a deadline gets this much time. */
const DEFAULT_BUDGET_MS = 30_000;

// The in-process router transport carries request headers to the handler but
// not context values, so the envelope's fields ride as headers. The deadline
// is not a Connect timeout: the services answer at the deadline with what
// they know (an action id, whether it was dispatched) instead of being cut off.
const H = { commandId: "x-farm-command-id", requestedBy: "x-farm-requested-by", admin: "x-farm-requested-by-admin", deadline: "x-farm-deadline-ms" } as const;

/** The absolute deadline (ms since the epoch) of a routed call: its own, or the default budget from now. */
export function callDeadlineMs(call: AgentCall, now = Date.now()): number {
  return call.deadline ? timestampMs(call.deadline) : now + DEFAULT_BUDGET_MS;
}

/** The headers that carry an envelope's context to the agent's services. */
export function callHeaders(call: AgentCall, now = Date.now()): Headers {
  const deadline = callDeadlineMs(call, now);
  return new Headers({
    [H.commandId]: call.commandId,
    [H.requestedBy]: call.requestedBy,
    [H.admin]: call.requestedByAdmin ? "1" : "0",
    [H.deadline]: String(Math.floor(deadline)),
  });
}

/** The context of the call a service handler is running. */
export function callContext(ctx: HandlerContext): CallContext {
  const h = ctx.requestHeader;
  const deadline = Number(h.get(H.deadline));
  return {
    commandId: h.get(H.commandId) ?? "",
    requestedBy: h.get(H.requestedBy) ?? "",
    admin: h.get(H.admin) === "1",
    deadlineMs: Number.isFinite(deadline) && deadline > 0 ? deadline : Date.now() + DEFAULT_BUDGET_MS,
  };
}

/** In a session step, reports an attempt given up on into the step (stepAttempts); otherwise nothing. */
export function attemptRecorder(ctx: HandlerContext): ((a: { startedAt: number; durationMs: number; error: unknown }) => void) | undefined {
  const list = ctx.values.get(stepAttempts);
  if (!list) return undefined;
  return (a) => list.push(create(StepAttemptReportSchema, { startTime: timestampFromMs(a.startedAt), durationMs: a.durationMs, error: toCommandError(toErrorReport(a.error), a.error) }));
}
