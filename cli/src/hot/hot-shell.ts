import type { HotShellResponse } from "@farm/shared/hot-shell-codec";
import type { shellOptions } from "../tree/device-commands.js";
import type { Action } from "../tree/spec.js";
import type { OneCallOutcome } from "./one-call.js";
import { takeRecordedCall } from "./recorded-call.js";
import { attemptShell, printShell, type ShellPlan } from "./shell-attempt.js";

/**
 * `farm shell -- …` as one request (shell-attempt.ts): the same command as
 * commands/device.ts's shell, which runs instead whenever this one would
 * differ in any way before anything is sent (no command words, no device,
 * a flag that needs a session, anything planCall leaves to the full path, a
 * coordinator it cannot connect to). A plain answer is read there; any other
 * answer is judged by the usual client code (one-call-replay.ts), so what
 * the command prints and its exit code are the same, only sooner. A call
 * lib/one.cjs already made (recorded-call.ts) is judged here, not repeated.
 */
export const hotShell: Action<typeof shellOptions> = async (input) => {
  const attempt = await attemptShell(input, takeRecordedCall("shell"));
  if (attempt.kind === "done") return attempt.code;
  if (attempt.kind === "unplanned" || !attempt.outcome.sent) return (await import("../commands/device.js")).shell(input);
  return printShell(input.ctx, await replayShell(attempt.outcome, attempt.plan, attempt.started));
};

/** A non-plain answer, judged by the usual client code: the shell's result, or the error the full path throws for it. */
async function replayShell(outcome: Extract<OneCallOutcome, { sent: true }>, plan: ShellPlan, started: number): Promise<HotShellResponse> {
  const [{ replayCall }, { DeviceService }, { failureAsSent, toFarmError }] = await Promise.all([
    import("./one-call-replay.js"),
    import("@farm/shared/gen/farm/v1/device_service_pb"),
    import("@farm/client/to-farm-error"),
  ]);
  try {
    return await replayCall(outcome, {
      method: DeviceService.method.runShell,
      input: { target: plan.target, command: plan.command },
      config: plan.session.config,
      timeoutMs: plan.session.timeoutMs,
      requestId: plan.requestId,
      started,
      origin: plan.request.origin,
    });
  } catch (err) {
    // Device.shell's farmCall, then the CLI's asCli.
    throw failureAsSent(toFarmError(err));
  }
}
