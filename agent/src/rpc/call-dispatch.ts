import { create, fromBinary, toBinary, type DescMessage, type DescMethodUnary, type DescService, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import type { Logger } from "@farm/shared/log";
import { toCommandError } from "@farm/shared/command-error";
import { actionError, Errors, farmError, relayedError, toErrorReport } from "@farm/shared/errors";
import { withoutHostPaths } from "@farm/shared/host-paths";
import { methodPath, rulesOf } from "@farm/shared/method-rules";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  AgentCallResultSchema,
  StepEvidenceSchema,
  type AgentCall,
  type AgentCallResult,
  StepArtifactReportSchema,
  type StepArtifactReport,
  type StepAttemptReport,
  type StepCapture,
  type StepEvidence,
  type StepShot,
} from "@farm/shared/gen/farm/v1/agent_service_pb";
import { callDeadlineMs, callHeaders, stepAttempts, stepRedactor } from "./call-context.js";
import { createRedactor } from "@farm/shared/redaction/redactor";
import type { ServiceRoute } from "./routes.js";
import type { StepShooter } from "../session/step-shooter.js";
import type { StepCaptures } from "../session/step-captures.js";
import { maskStepTrees } from "../session/step-trees.js";
import { stageTrace } from "@farm/shared/stage-trace";
import { leanHandlerContext } from "@farm/shared/lean-handler-context";

/** A step's before capture gets at most this long, and at most a quarter of the budget. */
const BEFORE_MAX_MS = 5_000;
/** Kept back from the action for the after capture: at most this, and at most a fifth of what is left. */
const AFTER_MAX_MS = 5_000;

/** Failures of this host rather than of the request: logged at error level where they happen. */
const hostFailureCodes = new Set<string>([Errors.INTERNAL.code]);
const hostFailureGrpc = new Set<Code>([Code.Internal, Code.DataLoss, Code.Unknown, Code.ResourceExhausted]);

export interface DispatchDeps {
  /** The services and their implementations (routes.ts). */
  routes: readonly ServiceRoute[];
  /** Non-empty while draining: new work is refused. */
  drainReason(): string;
  log: Logger;
  /** Host directories whose paths never reach a client. */
  hostPaths: readonly string[];
  /** Screenshots around session steps; absent, steps carry no captures. */
  shots?: StepShooter | undefined;
  /** Starts the further evidence a step asks for (StepCapture.captures); absent, those are reported skipped. */
  captures?: ((serial: string, step: StepCapture, untilMs: number) => Promise<StepCaptures>) | undefined;
}

/**
 * Runs one routed call: finds its method, invokes the agent's service,
 * answers with its response or error. `cancelled` aborts when the
 * coordinator says the caller went away (AgentCallCancel): the handler
 * sees it as ctx.signal.
 */
export type CallDispatcher = (call: AgentCall, cancelled?: AbortSignal) => Promise<AgentCallResult>;

type UnaryHandler = (input: unknown, ctx: HandlerContext) => unknown;

/**
 * The agent's side of routing: an envelope names a method of one of the
 * agent's services (routes.ts) and carries its request. The method's
 * ServiceImpl handler runs with a Connect HandlerContext, inside the rules
 * its method declares. Called directly rather than through
 * createRouterTransport: the in-process protocol round trip cost about 3 ms
 * per routed call under load (test/bench/routing-overhead.ts), a quarter of
 * a routed read, and buys nothing here (the request is already decoded and
 * the answer is encoded once, into the envelope).
 */
export function callDispatcher(deps: DispatchDeps): CallDispatcher {
  const methods = new Map<string, { method: DescMethodUnary; service: DescService; handler: UnaryHandler | undefined }>();
  for (const { service, impl } of deps.routes) {
    for (const m of service.methods) {
      if (m.methodKind !== "unary") continue;
      const handler = (impl as Record<string, UnaryHandler | undefined>)[m.localName];
      methods.set(methodPath(m), { method: m as DescMethodUnary, service, handler: handler?.bind(impl) });
    }
  }

  return async (call, cancelled) => {
    try {
      const found = methods.get(call.method);
      if (!found?.handler) throw farmError(Errors.NOT_IMPLEMENTED, `this agent does not implement ${call.method || "(no method)"}`);
      const { method, service, handler } = found;
      let input;
      try {
        input = fromBinary(method.input, call.request);
      } catch (err) {
        throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `the request for ${call.method} does not decode: ${(err as Error).message}`);
      }
      const context = (c: AgentCall) =>
        leanHandlerContext({ service, method, protocolName: "farm-agent-call", requestMethod: "POST", url: `farm-agent:/${call.method}`, requestHeader: callHeaders(c), ...(cancelled ? { requestSignal: cancelled } : {}) });
      const ctx = context(call);
      if (call.step && rulesOf(method).sessionStep && deps.shots) {
        const serial = String((input as { target?: { serial?: string } }).target?.serial ?? "");
        const step: { evidence?: StepEvidence } = {};
        try {
          const output = await withRules(deps, method, ctx, () => aroundStep(deps, call, serial, step, (c) => handler(input, c), context));
          const masked = maskStepTrees(method, output, call.step.redaction);
          return create(AgentCallResultSchema, { commandId: call.commandId, response: encode(method, masked), ...(step.evidence ? { step: step.evidence } : {}) });
        } catch (err) {
          return create(AgentCallResultSchema, { commandId: call.commandId, error: toCommandError(toErrorReport(err), err), ...(step.evidence ? { step: step.evidence } : {}) });
        }
      }
      stageTrace?.mark(call.commandId, "ag.handler");
      const output = await withRules(deps, method, ctx, () => handler(input, ctx));
      stageTrace?.mark(call.commandId, "ag.handled");
      return create(AgentCallResultSchema, { commandId: call.commandId, response: encode(method, output) });
    } catch (err) {
      return create(AgentCallResultSchema, { commandId: call.commandId, error: toCommandError(toErrorReport(err), err) });
    }
  };
}

function encode(method: DescMethodUnary, output: unknown): Uint8Array {
  return toBinary(method.output, create(method.output, output as MessageInitShape<DescMessage>));
}

/**
 * Runs a session step between two screenshots taken here, next to the
 * phone: one just before the handler, one just after it returns or fails.
 * The action's deadline is moved up by what the after capture needs, so a
 * step cut off at its deadline still shows the screen it left. What was
 * captured is put in `into` whatever happens.
 */
async function aroundStep(
  deps: DispatchDeps,
  call: AgentCall,
  serial: string,
  into: { evidence?: StepEvidence },
  run: (ctx: HandlerContext) => unknown,
  context: (c: AgentCall) => HandlerContext,
): Promise<unknown> {
  const shots = deps.shots as StepShooter;
  const deadline = callDeadlineMs(call);
  const known = new Set(call.step?.knownSha256 ?? []);
  const scrub = (s: StepShot): StepShot => (s.error ? { ...s, error: { ...s.error, message: withoutHostPaths(s.error.message, deps.hostPaths) } } : s);
  const rawBefore = await shots.capture(serial, Date.now() + Math.min(BEFORE_MAX_MS, Math.max(0, deadline - Date.now()) / 4));
  // Checked and sent while the action runs; only the capture is on its path.
  const before = shots.settle(rawBefore, new Set(known));
  // Further evidence (UI trees, the device log) starts after the before screenshot, right before the action.
  let extras: StepCaptures | undefined;
  const skipped: StepArtifactReport[] = [];
  if (call.step && call.step.captures.length > 0) {
    if (deps.captures) {
      try {
        extras = await deps.captures(serial, call.step, deadline);
      } catch (err) {
        skipped.push(
          ...call.step.captures.map((t) => create(StepArtifactReportSchema, { name: t, kind: t.split(".")[0] ?? t, provider: "agent", token: t, warning: `dropped: ${withoutHostPaths(toErrorReport(err).message, deps.hostPaths)}` })),
        );
      }
    } else {
      skipped.push(...call.step.captures.map((t) => create(StepArtifactReportSchema, { name: t, kind: t.split(".")[0] ?? t, provider: "agent", token: t, skippedReason: "this agent supplies no evidence beyond screenshots" })));
    }
  }
  const reserve = Math.min(AFTER_MAX_MS, Math.max(0, deadline - Date.now()) / 5);
  const attempts: StepAttemptReport[] = [];
  const ctx = context({ ...call, deadline: timestampFromMs(Math.floor(deadline - reserve)) });
  ctx.values.set(stepAttempts, attempts);
  const secrets = call.step?.redaction?.secrets ?? [];
  if (secrets.length > 0) ctx.values.set(stepRedactor, createRedactor({ secrets }));
  const started = Date.now();
  try {
    return await run(ctx);
  } finally {
    const durationMs = Date.now() - started;
    const rawAfter = await shots.capture(serial, deadline);
    const settled = await before;
    // The same screen after is not sent twice, once it was checked and sent as the before one.
    if (settled.sha256 && !settled.error) known.add(settled.sha256);
    const after = scrub(await shots.settle(rawAfter, known));
    const artifacts = [...skipped, ...(extras ? await extras.finish(deadline) : [])].map((a) => (a.warning ? { ...a, warning: withoutHostPaths(a.warning, deps.hostPaths) } : a));
    into.evidence = create(StepEvidenceSchema, { before: scrub(settled), after, startTime: timestampFromMs(started), durationMs, attempts, artifacts });
  }
}

/**
 * What every routed call goes through on this agent, from the method's
 * rules: a draining agent takes only what finishes existing work; a failure
 * of this host is logged with its cause; no host path reaches the caller;
 * a device change that failed before its journal entry says it was not
 * dispatched.
 */
async function withRules(deps: DispatchDeps, method: DescMethodUnary, ctx: HandlerContext, run: () => unknown): Promise<unknown> {
  const rules = rulesOf(method);
  try {
    const draining = deps.drainReason();
    if (draining && !rules.whileDraining) {
      throw actionError(Errors.AGENT_DRAINING, `agent is draining (${draining}) and takes no new work`, { dispatched: false, ambiguous: false });
    }
    return await run();
  } catch (err) {
    const report = toErrorReport(err);
    const status = ConnectError.from(err).code;
    if (hostFailureCodes.has(report.code) || hostFailureGrpc.has(status) || isStorageFailure(err)) {
      deps.log.error("command failed on this host", { command: method.localName, commandId: ctx.requestHeader.get("x-farm-command-id") ?? "", code: report.code, error: report.message });
    }
    const message = withoutHostPaths(report.message, deps.hostPaths);
    // Every failure of a change that carries no outcome happened before
    // its journal entry (argument checks): nothing reached the device.
    const dispatched = report.dispatched !== undefined ? report.dispatched : rules.deviceChange ? false : undefined;
    const outcome = dispatched === undefined && !report.actionId
      ? undefined
      : { dispatched: dispatched ?? null, ambiguous: report.ambiguous ?? false, actionId: report.actionId ?? "", agentId: report.agentId ?? "" };
    throw relayedError(status, report.code, message, report.field, outcome, err);
  }
}

/** A file-system failure of this host (full disk, I/O error), whatever code it was reported under. */
function isStorageFailure(err: unknown): boolean {
  const code = (err as { code?: unknown; cause?: { code?: unknown } } | null)?.cause?.code ?? (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^E[A-Z]+$/.test(code);
}
