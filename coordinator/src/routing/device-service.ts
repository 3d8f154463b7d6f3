import { checkDeviceFilePath } from "@farm/shared/device-files";
import { withReportedSerial } from "./resolve-target.js";
import type { ConnectRouter, HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { fromBinary, toBinary, type DescMethod, type DescMethodUnary, type Message } from "@bufbuild/protobuf";
import { createHash } from "node:crypto";
import { canonicalJson } from "@farm/shared/canonical-json";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { methodPath, rulesOf } from "@farm/shared/method-rules";
import { DeviceService, type AbandonActionRequest, type DeviceTarget, type GetActionReceiptResponse, type GetOwnershipResponse, type ReconcileOwnershipResponse } from "@farm/shared/gen/farm/v1/device_service_pb";
import { requirePrincipal } from "../auth/auth.js";
import type { Principal } from "../auth/token-store.js";
import { checkPropValue, checkShellCommand } from "@farm/shared/command-limits";
import { actionRecordFor, inputDetail, ownershipFor } from "./command-privacy.js";
import type { Summarizer } from "../auth/summary-key.js";
import type { AgentCaller } from "./agent-session.js";
import type { Registry, Route } from "../registry/registry.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { ActivityLog } from "../activity/activity-log.js";
import type { AnswerCodec, Idempotency } from "./idempotency.js";
import type { StepRecorder } from "../sessions/step-recorder.js";
import { CAPTURE_HEADER } from "../sessions/capture-plans.js";
import { captureTokenProblem } from "@farm/shared/capture-policy/capture-token";
import { LOG_FILTERSPEC_PATTERN, PACKAGE_PATTERN } from "@farm/shared/capture-policy/policy-schema";
import { stageTrace, TRACE_HEADER } from "@farm/shared/stage-trace";
import { isBinaryRequest } from "@farm/shared/pre-encoded";
import { ownershipAsIs } from "./ownership-as-is.js";

/** The header naming the recorded session a call is a step of (FARM_SESSION in the CLI). */
export const SESSION_HEADER = "x-farm-session";

export interface DeviceServiceDeps {
  registry: Registry;
  leases: LeaseManager;
  activity: ActivityLog;
  idempotency: Idempotency;
  log: Logger;
  /** Deadline for calls that set none. */
  defaultTimeoutMs?: number;
  /** Records calls made in a session; absent, the session header is refused. */
  recorder?: StepRecorder | undefined;
  /** Summarises what a viewer may not read in journal records (command-privacy.ts). */
  summaries: Summarizer;
}

type Request = Message & { target?: DeviceTarget };
type Method = DescMethodUnary;

/**
 * What the coordinator adds to a forwarded method beyond the rules every
 * method gets: a note before it runs, and the caller's view of the answer
 * (journal records carry command text: command-privacy.ts).
 */
interface MethodHooks {
  before?(req: Request, caller: Principal, log: Logger): void;
  view?(res: Message, caller: Principal, key: Summarizer): Message;
  /**
   * The agent's encoded answer as this caller's answer, when the view would
   * change nothing in it (binary protobuf callers only); undefined: decode
   * and view as usual.
   */
  asIs?(response: Uint8Array, caller: Principal): Message | undefined;
}

/** Answers passed on as the agent encoded them: the view has been decided already. */
const passedAsIs = new WeakSet<Message>();

const actionView = (res: Message, viewer: Principal, key: Summarizer): Message => {
  const r = res as GetActionReceiptResponse;
  return { ...r, action: r.action && actionRecordFor(viewer, r.action, key) } as GetActionReceiptResponse;
};

const hooks: Partial<Record<string, MethodHooks>> = {
  getOwnership: {
    view: (res, viewer, key) => {
      const r = res as GetOwnershipResponse;
      return { ...r, ownership: ownershipFor(viewer, r.ownership, key) } as GetOwnershipResponse;
    },
    asIs: ownershipAsIs,
  },
  reconcileOwnership: {
    view: (res, viewer, key) => {
      const r = res as ReconcileOwnershipResponse;
      return {
        ...r,
        settled: r.settled.map((a) => actionRecordFor(viewer, a, key)),
        unresolved: r.unresolved.map((a) => actionRecordFor(viewer, a, key)),
        ownership: ownershipFor(viewer, r.ownership, key),
      } as ReconcileOwnershipResponse;
    },
  },
  getActionReceipt: { view: actionView },
  abandonAction: {
    before: (req, caller, log) => log.warn("abandon requested", { serial: req.target?.serial, actionId: (req as AbandonActionRequest).actionId, by: caller.tokenName }),
    view: actionView,
  },
};

/**
 * Forwards every DeviceService method, from its descriptor, to the one
 * agent that reports the serial and returns that agent's answer. What a
 * method needs (a lease, the lease holder) comes from its rules in the
 * schema. The caller's deadline travels with it, a little shorter, so the
 * agent's answer can still arrive in time.
 */
export function registerDeviceService(router: ConnectRouter, deps: DeviceServiceDeps): void {
  async function route(method: Method, req: Request, ctx: HandlerContext): Promise<Message> {
    const principal = requirePrincipal(ctx);
    const requestId = req.target?.requestId ?? "";
    const run = () => recorded(method, req, ctx);
    if (requestId === "") return run();
    if (requestId.length > 128) throw invalidArgument("target.request_id", "request id is at most 128 characters");
    return deps.idempotency.run(principal.tokenName, requestId, fingerprint(method, req), answerCodec(method), run);
  }

  /** Runs the call and writes it to the activity log, whatever its outcome. */
  async function recorded(method: Method, req: Request, ctx: HandlerContext): Promise<Message> {
    const principal = requirePrincipal(ctx);
    const entry = { caller: principal.tokenName, leaseId: "", serial: req.target?.serial ?? "", physicalId: "", agentId: "", command: method.localName, requestId: req.target?.requestId ?? "", detail: detailOf(method, req) };
    return deps.activity.track(entry, (e) => dispatch(method, req, ctx, e));
  }

  async function dispatch(method: Method, req: Request, ctx: HandlerContext, entry: { leaseId: string; physicalId: string; agentId: string; detail: string }): Promise<Message> {
    const principal = requirePrincipal(ctx);
    const rules = rulesOf(method);
    const budget = ctx.timeoutMs() ?? deps.defaultTimeoutMs ?? 30_000;
    const deadline = Date.now() + budget;
    const sessionId = rules.sessionStep ? ctx.requestHeader.get(SESSION_HEADER) : null;
    if (sessionId) return dispatchStep(method, req, ctx, entry, sessionId, deadline);
    checkArguments(method, req);
    const serial = req.target?.serial ?? "";
    if (serial === "") throw invalidArgument("target.serial", "a device serial is required");
    const r = await routeFor(deps, serial, req.target?.agent ?? "", rules.deviceChange, ctx.requestHeader.get("x-farm-lease"), { method, caller: principal });
    entry.physicalId = r.physicalId;
    entry.agentId = r.agentId;
    entry.leaseId = r.leaseId;
    if (method === DeviceService.method.abandonAction) await requireAbandoner(deps.leases, r.physicalId, principal, ctx.requestHeader.get("x-farm-lease"));
    // Only for a call without a request id: the idempotency cache may answer a later JSON caller with it.
    const asIsHook = hooks[method.localName]?.asIs;
    const asIs = asIsHook && !req.target?.requestId && isBinaryRequest(ctx.requestHeader.get("content-type"))
      ? (response: Uint8Array) => {
        const m = asIsHook(response, principal);
        if (m) passedAsIs.add(m);
        return m;
      }
      : undefined;
    // The agent stops early enough for its answer to reach the caller in time.
    return (r.session as AgentCaller).call(method, req, principal, deadline, { trace: stageTrace && (ctx.requestHeader.get(TRACE_HEADER) ?? undefined), asIs, cancelled: ctx.signal });
  }

  /**
   * A call that is a step of a recorded session. The session is checked
   * first (running, the caller's, this phone): a call that fails those
   * checks is not part of it. From there on every outcome is a step,
   * refusals included, stored before the caller hears the answer.
   */
  async function dispatchStep(
    method: Method,
    req: Request,
    ctx: HandlerContext,
    entry: { leaseId: string; physicalId: string; agentId: string; detail: string },
    sessionId: string,
    deadline: number,
  ): Promise<Message> {
    const principal = requirePrincipal(ctx);
    const rules = rulesOf(method);
    const recorder = deps.recorder;
    if (!recorder) throw farmError(Errors.NOT_IMPLEMENTED, "this coordinator does not record sessions", "session_id");
    const serial = req.target?.serial ?? "";
    if (serial === "") throw invalidArgument("target.serial", "a device serial is required");
    const session = await recorder.session(sessionId, principal, deps.registry.route(serial, req.target?.agent ?? "").physicalId);
    const perAction = captureTokens(ctx.requestHeader.get(CAPTURE_HEADER));
    const log = logOptions(ctx.requestHeader);
    const step = await recorder.open(session);
    // The activity log keeps no secret of the session either: its detail is cut from the masked request.
    if (step.mask) entry.detail = detailOf(method, step.mask.json(req));
    const plan = recorder.planFor(step, method, req, perAction, log);
    let outcome: Awaited<ReturnType<AgentCaller["callStep"]>>;
    let agentToken = "";
    try {
      checkArguments(method, req);
      const r = await routeFor(deps, serial, req.target?.agent ?? "", rules.deviceChange, ctx.requestHeader.get("x-farm-lease"), { method, caller: principal });
      entry.physicalId = r.physicalId;
      entry.agentId = r.agentId;
      entry.leaseId = r.leaseId;
      if (rules.deviceChange && r.leaseId !== session.leaseId) {
        throw farmError(Errors.SESSION_MISMATCH, `session ${sessionId} belongs to lease ${session.leaseId}, not to the lease this call presents`, "session_id", { dispatched: false, ambiguous: false });
      }
      const agent = r.session as AgentCaller;
      agentToken = agent.tokenName;
      outcome = await agent.callStep(method, req, principal, deadline, { sessionId, sequence: step.sequence, knownSha256: step.known, ...plan }, ctx.signal);
    } catch (error) {
      outcome = { error };
    }
    await recorder.record(step, method, req, outcome, agentToken, principal.tokenName);
    if (outcome.error !== undefined || !outcome.response) throw outcome.error ?? farmError(Errors.INTERNAL, "the agent sent neither an answer nor an error");
    return outcome.response;
  }

  const impl: Record<string, (req: Request, ctx: HandlerContext) => Promise<Message>> = {};
  for (const m of DeviceService.methods) {
    const method = m as Method;
    const h = hooks[method.localName];
    impl[method.localName] = async (req, ctx) => {
      const trace = stageTrace && ctx.requestHeader.get(TRACE_HEADER);
      if (trace) stageTrace?.mark(trace, "co.in");
      const caller = requirePrincipal(ctx);
      req = withReportedSerial(deps.registry, req);
      h?.before?.(req, caller, deps.log);
      const res = await route(method, req, ctx);
      const out = h?.view && !passedAsIs.has(res) ? h.view(res, caller, deps.summaries) : res;
      if (trace) stageTrace?.mark(trace, "co.out");
      return out;
    };
  }
  router.service(DeviceService, impl as unknown as ServiceImpl<typeof DeviceService>);
}

/**
 * The route for a call on one serial, checked: exactly the agent that
 * reports it, and for a mutation the caller's lease on its physical device
 * (and no duplicate identity). Every service that routes a call to a phone
 * comes here with its method: a lease_holder_only method on a leased phone
 * is refused to anyone but its lease holder or an admin, in the method's
 * own words, before anything is issued for the call or reaches its agent.
 */
export async function routeFor(
  deps: { registry: Registry; leases: LeaseManager },
  serial: string,
  agent: string,
  mutation: boolean,
  leaseToken: string | null,
  call: { method: DescMethod; caller: { tokenName: string; admin: boolean } },
): Promise<Route & { leaseId: string }> {
  const r = deps.registry.route(serial, agent);
  const rules = rulesOf(call.method);
  if (rules.leaseHolderOnly) await deps.leases.requireHolderToRead(r.physicalId, call.caller, leaseToken, rules.leaseHolderAction || `call ${methodPath(call.method)} on it`);
  if (!mutation) return { ...r, leaseId: deps.leases.leaseOf(r.physicalId)?.leaseId ?? "" };
  const unresolved = deps.registry.unresolvedOn(r.physicalId);
  if (unresolved.length > 0) {
    const first = unresolved[0] as (typeof unresolved)[number];
    throw farmError(
      Errors.DEVICE_OWNERSHIP_UNRESOLVED,
      `device ${serial} (${r.physicalId}) has actions with an unknown outcome: ${
        unresolved.map((u) => `${u.actionIds.join(", ")} on agent ${u.agentName}`).join("; ")
      }; reconcile them (\`farm device ownership reconcile --device SERIAL\` on a serial of that agent) or have an admin abandon them`,
      undefined,
      { dispatched: false, ambiguous: false, actionId: first.actionIds[0] as string, agentId: first.agentId },
    );
  }
  if (r.identityStatus === "duplicate") {
    throw farmError(
      Errors.DUPLICATE_IDENTITY,
      `device ${serial} shares its identity (${r.physicalId}) with another phone; pin them apart with \`farm device pin\` before changing either`,
      "target.serial",
      { dispatched: false, ambiguous: false },
    );
  }
  // On PostgreSQL the stored lease decides (one indexed read): a lease released or expired through another replica is refused here in the next call, not once its notice arrives.
  return { ...r, leaseId: (await deps.leases.authorizeStored(r.physicalId, leaseToken)).leaseId };
}

/**
 * Abandoning an action: an admin, or the phone's lease holder (on a free
 * phone too, only an admin). The agent lets a non-admin abandon only a
 * raw-adb action: which kind an action is, only its journal says.
 */
async function requireAbandoner(leases: LeaseManager, physicalId: string, caller: Principal, leaseToken: string | null): Promise<void> {
  if (caller.admin || (await leases.isHolderStored(physicalId, caller.tokenName, leaseToken))) return;
  throw farmError(
    Errors.LEASE_REQUIRED,
    `abandoning an action on ${physicalId} needs an admin, or the phone's lease (its holder may abandon a remote adb tunnel's raw-adb action)`,
    "lease",
    { dispatched: false, ambiguous: false },
  );
}

/**
 * Argument caps, checked before a call is routed (the agent checks them
 * again): a refusal names the field and reached no device.
 */
function checkArguments(method: Method, req: unknown): void {
  const r = req as Record<string, unknown>;
  if (method === DeviceService.method.runShell) checkShellCommand(String(r["command"] ?? ""));
  if (method === DeviceService.method.setProperty) checkPropValue(String(r["value"] ?? ""));
  if (method === DeviceService.method.pushFile || method === DeviceService.method.pullFile) checkDeviceFilePath(String(r["path"] ?? ""));
}

/** The method's answer as kept for its request id: protobuf binary, in base64. */
function answerCodec(method: Method): AnswerCodec<Message> {
  return {
    encode: (m) => Buffer.from(toBinary(method.output, m as never)).toString("base64"),
    decode: (text) => fromBinary(method.output, Buffer.from(text, "base64")),
  };
}

function fingerprint(method: Method, req: Request): string {
  // The request id itself is not part of what is being asked.
  const copy = { ...req, target: req.target ? { ...req.target, requestId: "" } : undefined };
  return createHash("sha256").update(method.localName).update(canonicalJson(copy)).digest("hex");
}

/** A short description of the arguments for the activity log; secrets in it are shown to others redacted (command-privacy.ts). */
function detailOf(method: Method, req: unknown): string {
  const r = req as Record<string, unknown>;
  switch (method.localName) {
    case "runShell":
      return String(r["command"] ?? "").slice(0, 200);
    case "setProperty":
      return `${String(r["key"])}=${String(r["value"]).slice(0, 100)}`;
    case "getActionReceipt":
    case "abandonAction":
      return String(r["actionId"] ?? "");
    case "getAppEndpoint":
      return `${String(r["app"] ?? "")}${r["wdaRunner"] ? ` wda ${String(r["wdaRunner"])}` : ""}`;
    case "removeAppForward":
      return `tcp:${String(r["port"] ?? "")}`;
    case "pushFile":
    case "pullFile":
      return String(r["path"] ?? "").slice(0, 200);
    case "sendInput":
      return inputDetail(r);
    default:
      return "";
  }
}

/** `--capture` tokens of one action (header x-farm-capture, comma-separated), each checked. */
function captureTokens(header: string | null): string[] {
  if (!header) return [];
  const tokens = header.split(",").map((t) => t.trim()).filter(Boolean);
  if (tokens.length > 50) throw invalidArgument("capture", "at most 50 capture tokens");
  for (const t of tokens) {
    const problem = captureTokenProblem(t);
    if (problem) throw invalidArgument("capture", problem);
  }
  return tokens;
}

const packagePattern = new RegExp(PACKAGE_PATTERN);
const filterspecPattern = new RegExp(LOG_FILTERSPEC_PATTERN);

/** `--log-package` / `--log-filter` of one action, checked as the policy's `log` is (they run in the phone's shell). */
function logOptions(h: Headers): { package?: string; filterspec?: string } {
  const pkg = h.get("x-farm-log-package") ?? "";
  const filter = h.get("x-farm-log-filter") ?? "";
  if (pkg && (pkg.length > 255 || !packagePattern.test(pkg))) throw invalidArgument("log-package", "an Android package name (com.example.app)");
  if (filter && (filter.length > 1024 || !filterspecPattern.test(filter))) throw invalidArgument("log-filter", "a logcat filterspec: TAG:LEVEL pairs separated by spaces (\"*:W ActivityManager:I\")");
  return { ...(pkg ? { package: pkg } : {}), ...(filter ? { filterspec: filter } : {}) };
}
