import { create, fromBinary, toBinary, type DescMethodUnary, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import type { Logger } from "@farm/shared/log";
import { toCommandError } from "@farm/shared/command-error";
import { actionError, Errors, farmError, relayedError, toErrorReport } from "@farm/shared/errors";
import { withoutHostPaths } from "@farm/shared/host-paths";
import { methodPath, rulesOf } from "@farm/shared/method-rules";
import { AgentCallResultSchema, type AgentCall, type AgentCallResult } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { callHeaders } from "./call-context.js";

/** Failures of this host rather than of the request: logged at error level where they happen. */
const hostFailureCodes = new Set<string>([Errors.INTERNAL.code]);
const hostFailureGrpc = new Set<Code>([Code.Internal, Code.DataLoss, Code.Unknown, Code.ResourceExhausted]);

export interface DispatchDeps {
  /** Registers the services (routes.ts). */
  routes(router: ConnectRouter): void;
  /** The services routes registers: only their methods are looked up. */
  services: readonly DescService[];
  /** Non-empty while draining: new work is refused. */
  drainReason(): string;
  log: Logger;
  /** Host directories whose paths never reach a client. */
  hostPaths: readonly string[];
}

/** Runs one routed call: finds its method, invokes the agent's service, answers with its response or error. */
export type CallDispatcher = (call: AgentCall) => Promise<AgentCallResult>;

/**
 * The agent's side of routing: an envelope names a method of one of the
 * agent's services (routes.ts) and carries its request; the call runs
 * through an in-process Connect router, so each service is a plain
 * ServiceImpl and the rules on its methods apply on the way in.
 */
export function callDispatcher(deps: DispatchDeps): CallDispatcher {
  const methods = new Map<string, DescMethodUnary>();
  for (const s of deps.services) for (const m of s.methods) if (m.methodKind === "unary") methods.set(methodPath(m), m as DescMethodUnary);
  const transport = createRouterTransport(deps.routes, { router: { interceptors: [callRules(deps)] } });

  return async (call) => {
    try {
      const method = methods.get(call.method);
      if (!method) throw farmError(Errors.NOT_IMPLEMENTED, `this agent does not implement ${call.method || "(no method)"}`);
      let input;
      try {
        input = fromBinary(method.input, call.request);
      } catch (err) {
        throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `the request for ${call.method} does not decode: ${(err as Error).message}`);
      }
      const res = await transport.unary(method, undefined, undefined, callHeaders(call), input);
      return create(AgentCallResultSchema, { commandId: call.commandId, response: toBinary(method.output, res.message) });
    } catch (err) {
      return create(AgentCallResultSchema, { commandId: call.commandId, error: toCommandError(toErrorReport(err), err) });
    }
  };
}

/**
 * What every routed call goes through on this agent, from the method's
 * rules: a draining agent takes only what finishes existing work; a failure
 * of this host is logged with its cause; no host path reaches the caller;
 * a device change that failed before its journal entry says it was not
 * dispatched.
 */
function callRules(deps: DispatchDeps): Interceptor {
  return (next) => async (req) => {
    const rules = rulesOf(req.method);
    try {
      const draining = deps.drainReason();
      if (draining && !rules.whileDraining) {
        throw actionError(Errors.AGENT_DRAINING, `agent is draining (${draining}) and takes no new work`, { dispatched: false, ambiguous: false });
      }
      return await next(req);
    } catch (err) {
      const report = toErrorReport(err);
      const status = ConnectError.from(err).code;
      if (hostFailureCodes.has(report.code) || hostFailureGrpc.has(status) || isStorageFailure(err)) {
        deps.log.error("command failed on this host", { command: req.method.localName, commandId: req.header.get("x-farm-command-id") ?? "", code: report.code, error: report.message });
      }
      const message = withoutHostPaths(report.message, deps.hostPaths);
      // Every failure of a change that carries no outcome happened before
      // its journal entry (argument checks): nothing reached the device.
      const dispatched = report.dispatched !== undefined ? report.dispatched : rules.deviceChange ? false : undefined;
      const outcome =
        dispatched === undefined && !report.actionId
          ? undefined
          : { dispatched: dispatched ?? null, ambiguous: report.ambiguous ?? false, actionId: report.actionId ?? "", agentId: report.agentId ?? "" };
      throw relayedError(status, report.code, message, report.field, outcome, err);
    }
  };
}

/** A file-system failure of this host (full disk, I/O error), whatever code it was reported under. */
function isStorageFailure(err: unknown): boolean {
  const code = (err as { code?: unknown; cause?: { code?: unknown } } | null)?.cause?.code ?? (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^E[A-Z]+$/.test(code);
}
