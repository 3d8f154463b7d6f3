import { Code, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { ErrorCodes, farmError, invalidArgument } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { DeviceService, type DeviceTarget } from "@farm/shared/gen/farm/v1/device_service_pb";
import type { AgentCommand, CommandResult } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { requirePrincipal } from "./auth.js";
import type { AttachSession } from "./agent-session.js";
import type { Registry } from "./registry.js";

export interface DeviceServiceDeps {
  registry: Registry;
  log: Logger;
  /** Deadline for calls that set none. */
  defaultTimeoutMs?: number;
}

type Kind = NonNullable<AgentCommand["kind"]["case"]>;
type Value<K extends Kind> = Extract<AgentCommand["kind"], { case: K }>["value"];
type ResultValue<K extends Kind> = Extract<CommandResult["kind"], { case: K }>["value"];

/**
 * Routes each request verbatim to the one agent that reports the serial and
 * returns that agent's answer. The caller's deadline travels with it, a
 * little shorter, so the agent's answer can still arrive in time.
 */
export function registerDeviceService(router: ConnectRouter, deps: DeviceServiceDeps): void {
  async function route<K extends Kind>(kind: K, req: Value<K> & { target?: DeviceTarget }, ctx: HandlerContext): Promise<ResultValue<K>> {
    const principal = requirePrincipal(ctx);
    const serial = req.target?.serial ?? "";
    if (serial === "") throw invalidArgument("serial", "a device serial is required");
    const r = deps.registry.route(serial, req.target?.agent ?? "");
    const budget = ctx.timeoutMs() ?? deps.defaultTimeoutMs ?? 30_000;
    const callerDeadline = Date.now() + budget;
    const agentDeadline = callerDeadline - Math.min(1_000, budget * 0.1);
    const session = r.session as AttachSession;
    const result = await session.call(
      { kind: { case: kind, value: req } as AgentCommand["kind"], requestedBy: principal.tokenName, requestedByAdmin: principal.admin },
      agentDeadline,
    );
    if (result.kind.case === "error") {
      const e = result.kind.value;
      const d = e.detail;
      throw farmError(
        grpcCodeFor(d?.code ?? ""),
        d?.code || ErrorCodes.internal,
        e.message,
        d?.field || undefined,
        d && (d.dispatched !== undefined || d.ambiguous) ? { dispatched: d.dispatched ?? null, ambiguous: d.ambiguous } : undefined,
      );
    }
    if (result.kind.case !== kind) {
      throw farmError(Code.Internal, ErrorCodes.agentProtocolViolation, `agent ${r.agentName} answered ${result.kind.case ?? "nothing"} to ${kind}`);
    }
    return result.kind.value as ResultValue<K>;
  }

  router.service(DeviceService, {
    getOwnership: (req, ctx) => route("getOwnership", req, ctx),
    reconcileOwnership: (req, ctx) => route("reconcileOwnership", req, ctx),
    getActionReceipt: (req, ctx) => route("getActionReceipt", req, ctx),
    abandonAction: (req, ctx) => {
      deps.log.warn("abandon requested", { serial: req.target?.serial, actionId: req.actionId, by: requirePrincipal(ctx).tokenName });
      return route("abandonAction", req, ctx);
    },
    runShell: (req, ctx) => route("runShell", req, ctx),
    setProperty: (req, ctx) => route("setProperty", req, ctx),
    pinIdentity: (req, ctx) => route("pinIdentity", req, ctx),
  });
}

function grpcCodeFor(code: string): Code {
  switch (code) {
    case ErrorCodes.invalidArgument:
      return Code.InvalidArgument;
    case ErrorCodes.permissionDenied:
      return Code.PermissionDenied;
    case ErrorCodes.deviceNotFound:
    case ErrorCodes.actionNotFound:
      return Code.NotFound;
    case ErrorCodes.commandTimeout:
      return Code.DeadlineExceeded;
    case ErrorCodes.deviceBusy:
    case ErrorCodes.deviceOffline:
      return Code.Unavailable;
    case ErrorCodes.notImplemented:
      return Code.Unimplemented;
    default:
      return Code.FailedPrecondition;
  }
}
