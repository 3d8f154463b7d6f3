import { encodeRunShellRequest, readRunShellResponse, type HotShellResponse } from "@farm/shared/hot-shell-codec";
import type { shellOptions } from "../tree/device-commands.js";
import type { ActionInput, CommandContext } from "../tree/spec.js";
import { oneCall, plainAnswer, type OneCallOutcome } from "./one-call.js";
import { logVerbose, oneCallOff, planCall, type CallPlan } from "./one-call-plan.js";
import type { RecordedCall } from "./recorded-call.js";

/** The command's bytes the coordinator takes (shared/src/command-limits.ts SHELL_COMMAND_MAX_BYTES). */
const SHELL_COMMAND_MAX_BYTES = 32 * 1024;

export interface ShellPlan extends CallPlan {
  target: { serial: string; agent: string; requestId: string };
  command: string;
}

/**
 * `farm shell -- …`'s one request, as far as a plain success goes: no
 * dynamic import, nothing of the full path, so the plain runner
 * (plain-run.ts, lib/one.cjs) and the hot command (hot-shell.ts, lib/hot.cjs)
 * share it. `done`: printed, with the exit code; `unplanned`: the full path
 * would refuse or do something else first (nothing sent); otherwise the
 * call's outcome, for the full path (not sent) or the replay (sent).
 */
export type ShellAttempt =
  | { kind: "done"; code: number }
  | { kind: "unplanned" }
  | { kind: "called"; outcome: OneCallOutcome; plan: ShellPlan; started: number };

/** `recorded`: the call lib/one.cjs already made, judged instead of calling again. */
export async function attemptShell(input: ActionInput<typeof shellOptions>, recorded?: RecordedCall): Promise<ShellAttempt> {
  const plan = input.args.length === 0 || oneCallOff(input.ctx.env) ? undefined : planShell(input, recorded);
  if (!plan) return { kind: "unplanned" };
  const started = recorded?.started ?? performance.now();
  const outcome = recorded?.outcome ?? await oneCall(plan.request);
  const bytes = outcome.sent ? plainAnswer(outcome.events) : undefined;
  const res = bytes && readRunShellResponse(bytes);
  if (!res) return { kind: "called", outcome, plan, started };
  logVerbose(plan, "farm.v1.DeviceService/RunShell", started);
  return { kind: "done", code: printShell(input.ctx, res) };
}

/** The call commands/device.ts's shell would make (libraryDevice, Device.shell), or undefined wherever it would refuse first. */
function planShell(input: ActionInput<typeof shellOptions>, recorded: RecordedCall | undefined): ShellPlan | undefined {
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
  const plan = planCall(input, "/farm.v1.DeviceService/RunShell", encodeRunShellRequest({ target, command }), scope, recorded);
  return plan && { ...plan, target, command };
}

/** Prints the shell's result as commands/device.ts's shell does; its exit code. */
export function printShell(ctx: CommandContext, res: HotShellResponse): number {
  const stdout = Buffer.from(res.stdout).toString("utf8");
  const stderr = Buffer.from(res.stderr).toString("utf8");
  ctx.printer.result({ actionId: res.actionId, exitCode: res.exitCode, stdout, stderr, dispatched: res.dispatched ?? null, ambiguous: res.ambiguous }, () => {
    if (stderr) ctx.writeErr(stderr);
    return stdout.replace(/\n$/, "");
  });
  return res.exitCode === 0 ? 0 : Math.min(255, Math.max(1, res.exitCode));
}
