import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { createHash } from "node:crypto";
import { canonicalJson } from "@farm/shared/canonical-json";
import { Errors, farmError, invalidArgument, toErrorReport } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { DeviceService, type DeviceTarget } from "@farm/shared/gen/farm/v1/device_service_pb";
import type { AgentCommand } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { requirePrincipal } from "./auth.js";
import { checkPropValue, checkShellCommand } from "@farm/shared/command-limits";
import { actionRecordFor, ownershipFor } from "./command-privacy.js";
import type { AttachSession, CommandKind, ResultOf } from "./agent-session.js";
import type { Registry, Route } from "./registry.js";
import type { LeaseManager } from "./lease-manager.js";
import type { ActivityLog } from "./activity-log.js";
import type { IdempotencyCache } from "./idempotency-cache.js";

export interface DeviceServiceDeps {
  registry: Registry;
  leases: LeaseManager;
  activity: ActivityLog;
  idempotency: IdempotencyCache;
  log: Logger;
  /** Deadline for calls that set none. */
  defaultTimeoutMs?: number;
}

type Kind = CommandKind;
type Value<K extends Kind> = Extract<AgentCommand["kind"], { case: K }>["value"];
type Request = { target?: DeviceTarget };
type ResultValue<K extends Kind> = ResultOf<K>;

/**
 * Routes each request verbatim to the one agent that reports the serial and
 * returns that agent's answer. The caller's deadline travels with it, a
 * little shorter, so the agent's answer can still arrive in time.
 */
export function registerDeviceService(router: ConnectRouter, deps: DeviceServiceDeps): void {
  async function route<K extends Kind>(kind: K, req: Value<K> & { target?: DeviceTarget }, ctx: HandlerContext): Promise<ResultValue<K>> {
    const principal = requirePrincipal(ctx);
    const requestId = req.target?.requestId ?? "";
    const run = () => recorded(kind, req as Request, ctx) as Promise<ResultValue<K>>;
    if (requestId === "") return run();
    if (requestId.length > 128) throw invalidArgument("target.request_id", "request id is at most 128 characters");
    return deps.idempotency.run(principal.tokenName, requestId, fingerprint(kind, req), run);
  }

  /** Runs the call and writes it to the activity log, whatever its outcome. */
  async function recorded(kind: Kind, req: Request, ctx: HandlerContext): Promise<unknown> {
    const principal = requirePrincipal(ctx);
    const entry = { caller: principal.tokenName, leaseId: "", serial: req.target?.serial ?? "", physicalId: "", agentId: "", command: kind, requestId: req.target?.requestId ?? "", detail: detailOf(kind, req) };
    return deps.activity.track(entry, (e) => dispatch(kind, req, ctx, e));
  }

  async function dispatch(kind: Kind, req: Request, ctx: HandlerContext, entry: { leaseId: string; physicalId: string; agentId: string }): Promise<unknown> {
    const principal = requirePrincipal(ctx);
    checkArguments(kind, req);
    const serial = req.target?.serial ?? "";
    if (serial === "") throw invalidArgument("target.serial", "a device serial is required");
    const r = routeFor(deps, serial, req.target?.agent ?? "", mutations.has(kind), ctx.requestHeader.get("x-farm-lease"), holderOnly.has(kind) ? principal : undefined);
    entry.physicalId = r.physicalId;
    entry.agentId = r.agentId;
    entry.leaseId = r.leaseId;
    const budget = ctx.timeoutMs() ?? deps.defaultTimeoutMs ?? 30_000;
    // The agent stops early enough for its answer to reach the caller in time.
    return (r.session as AttachSession).request(kind, req, principal, Date.now() + budget);
  }

  router.service(DeviceService, {
    // Journal records carry command text: each caller sees what is theirs to see (command-privacy.ts).
    getOwnership: async (req, ctx) => {
      const res = await route("getOwnership", req, ctx);
      return { ownership: ownershipFor(requirePrincipal(ctx), res.ownership) };
    },
    reconcileOwnership: async (req, ctx) => {
      const res = await route("reconcileOwnership", req, ctx);
      const viewer = requirePrincipal(ctx);
      return { settled: res.settled.map((a) => actionRecordFor(viewer, a)), unresolved: res.unresolved.map((a) => actionRecordFor(viewer, a)), ownership: ownershipFor(viewer, res.ownership) };
    },
    getActionReceipt: async (req, ctx) => {
      const res = await route("getActionReceipt", req, ctx);
      return { action: res.action && actionRecordFor(requirePrincipal(ctx), res.action) };
    },
    abandonAction: async (req, ctx) => {
      deps.log.warn("abandon requested", { serial: req.target?.serial, actionId: req.actionId, by: requirePrincipal(ctx).tokenName });
      const res = await route("abandonAction", req, ctx);
      return { action: res.action && actionRecordFor(requirePrincipal(ctx), res.action) };
    },
    runShell: (req, ctx) => route("runShell", req, ctx),
    setProperty: (req, ctx) => route("setProperty", req, ctx),
    pinIdentity: (req, ctx) => route("pinIdentity", req, ctx),
    getProperties: (req, ctx) => route("getProperties", req, ctx),
    readLogcat: (req, ctx) => route("readLogcat", req, ctx),
    sendInput: (req, ctx) => route("sendInput", req, ctx),
    reboot: (req, ctx) => route("reboot", req, ctx),
    takeScreenshot: (req, ctx) => route("takeScreenshot", req, ctx),
    installApp: (req, ctx) => route("installApp", req, ctx),
    getAppEndpoint: (req, ctx) => route("getAppEndpoint", req, ctx),
    removeAppForward: (req, ctx) => route("removeAppForward", req, ctx),
  });
}

/**
 * The route for a call on one serial, checked: exactly the agent that
 * reports it, and for a mutation the caller's lease on its physical device
 * (and no duplicate identity). With `holder`, a leased phone is refused to
 * anyone but its lease holder or an admin.
 */
export function routeFor(
  deps: { registry: Registry; leases: LeaseManager },
  serial: string,
  agent: string,
  mutation: boolean,
  leaseToken: string | null,
  holder?: { tokenName: string; admin: boolean },
): Route & { leaseId: string } {
  const r = deps.registry.route(serial, agent);
  if (holder) deps.leases.requireHolder(r.physicalId, holder, leaseToken, "create or remove its app forwards");
  if (!mutation) return { ...r, leaseId: deps.leases.leaseOf(r.physicalId)?.leaseId ?? "" };
  const unresolved = deps.registry.unresolvedOn(r.physicalId);
  if (unresolved.length > 0) {
    const first = unresolved[0] as (typeof unresolved)[number];
    throw farmError(
      Errors.DEVICE_OWNERSHIP_UNRESOLVED,
      `device ${serial} (${r.physicalId}) has actions with an unknown outcome: ${unresolved.map((u) => `${u.actionIds.join(", ")} on agent ${u.agentName}`).join("; ")}; reconcile them (\`farm device ownership reconcile --device SERIAL\` on a serial of that agent) or have an admin abandon them`,
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
  return { ...r, leaseId: deps.leases.authorize(r.physicalId, leaseToken).leaseId };
}

/**
 * Argument caps, checked before a call is routed (the agent checks them
 * again): a refusal names the field and reached no device.
 */
function checkArguments(kind: Kind, req: unknown): void {
  const r = req as Record<string, unknown>;
  if (kind === "runShell") checkShellCommand(String(r["command"] ?? ""));
  if (kind === "setProperty") checkPropValue(String(r["value"] ?? ""));
}

/** Commands that change a device: they need the caller's lease. */
const mutations = new Set<Kind>(["runShell", "setProperty", "sendInput", "reboot", "installApp"]);
/** Commands on what hangs off a lease (app forwards): on a leased phone, only its holder or an admin. */
const holderOnly = new Set<Kind>(["getAppEndpoint", "removeAppForward"]);

function fingerprint(kind: string, req: { target?: DeviceTarget }): string {
  // The request id itself is not part of what is being asked.
  const copy = { ...req, target: req.target ? { ...req.target, requestId: "" } : undefined };
  return createHash("sha256").update(kind).update(canonicalJson(copy)).digest("hex");
}

/** A short, secret-free description of the arguments for the activity log. */
function detailOf(kind: Kind, req: unknown): string {
  const r = req as Record<string, unknown>;
  if (kind === "runShell") return String(r["command"] ?? "").slice(0, 200);
  if (kind === "setProperty") return `${String(r["key"])}=${String(r["value"]).slice(0, 100)}`;
  if (kind === "getActionReceipt" || kind === "abandonAction") return String(r["actionId"] ?? "");
  if (kind === "getAppEndpoint") return `${String(r["app"] ?? "")}${r["wdaRunner"] ? ` wda ${String(r["wdaRunner"])}` : ""}`;
  if (kind === "removeAppForward") return `tcp:${String(r["port"] ?? "")}`;
  return "";
}
