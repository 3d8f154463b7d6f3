import { encodeRunShellRequest, readRunShellResponse, type HotShellResponse } from "@farm/shared/hot-shell-codec";
import type { shellOptions } from "../tree/device-commands.js";
import type { Action, ActionInput } from "../tree/spec.js";
import { oneCall, plainAnswer, type OneCallOutcome } from "./one-call.js";
import { logVerbose, oneCallOff, planCall, type CallPlan } from "./one-call-plan.js";

/** The command's bytes the coordinator takes (shared/src/command-limits.ts SHELL_COMMAND_MAX_BYTES). */
const SHELL_COMMAND_MAX_BYTES = 32 * 1024;

/**
 * `farm shell -- …` as one request (one-call.ts): the same command as
 * commands/device.ts's shell, which runs instead whenever this one would
 * differ in any way before anything is sent (no command words, no device,
 * a flag that needs a session, anything planCall leaves to the full path, a
 * coordinator it cannot connect to). A plain answer is read here; any other
 * answer is judged by the usual client code (one-call-replay.ts), so what
 * the command prints and its exit code are the same, only sooner.
 */
export const hotShell: Action<typeof shellOptions> = async (input) => {
  const full = async () => (await import("../commands/device.js")).shell(input);
  const plan = input.args.length === 0 || oneCallOff(input.ctx.env) ? undefined : planShell(input);
  if (!plan) return full();
  const started = performance.now();
  const outcome = await oneCall(plan.request);
  if (!outcome.sent) return full();
  const bytes = plainAnswer(outcome.events);
  let res: HotShellResponse | undefined = bytes && readRunShellResponse(bytes);
  if (res) logVerbose(plan, "farm.v1.DeviceService/RunShell", started);
  else res = await replayShell(outcome, plan, started);
  const stdout = Buffer.from(res.stdout).toString("utf8");
  const stderr = Buffer.from(res.stderr).toString("utf8");
  const { ctx } = input;
  ctx.printer.result({ actionId: res.actionId, exitCode: res.exitCode, stdout, stderr, dispatched: res.dispatched ?? null, ambiguous: res.ambiguous }, () => {
    if (stderr) ctx.writeErr(stderr);
    return stdout.replace(/\n$/, "");
  });
  return res.exitCode === 0 ? 0 : Math.min(255, Math.max(1, res.exitCode));
};

interface ShellPlan extends CallPlan {
  target: { serial: string; agent: string; requestId: string };
  command: string;
}

/** The call commands/device.ts's shell would make (libraryDevice, Device.shell), or undefined wherever it would refuse first. */
function planShell(input: ActionInput<typeof shellOptions>): ShellPlan | undefined {
  const { opts, ctx } = input;
  const sessionId = ctx.env["FARM_SESSION"] || undefined;
  // Evidence flags without a session are refused by the full path (deviceScope).
  if (!sessionId && (opts.capture || opts.logPackage || opts.logFilter)) return undefined;
  if (!opts.device) return undefined;
  const command = input.args.join(" ");
  if (command.trim() === "" || Buffer.byteLength(command, "utf8") > SHELL_COMMAND_MAX_BYTES) return undefined;
  const target = { serial: opts.device, agent: opts.agent ?? "", requestId: opts.requestId ?? "" };
  // The call's scope (client/src/wire.ts Wire.options).
  const scope: Record<string, string> = {
    ...(opts.lease ? { "x-farm-lease": opts.lease } : {}),
    ...(sessionId ? { "x-farm-session": sessionId } : {}),
    ...(opts.capture ? { "x-farm-capture": opts.capture } : {}),
    ...(opts.logPackage ? { "x-farm-log-package": opts.logPackage } : {}),
    ...(opts.logFilter ? { "x-farm-log-filter": opts.logFilter } : {}),
  };
  const plan = planCall(input, "/farm.v1.DeviceService/RunShell", encodeRunShellRequest({ target, command }), scope);
  return plan && { ...plan, target, command };
}

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
