import type { ServiceImpl } from "@connectrpc/connect";
import { hopDeadline } from "@farm/shared/deadline";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import type { AgentControlService } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { RAW_ADB_KIND } from "../adb-tunnel/raw-adb-action.js";
import { callContext } from "./call-context.js";
import { checkCoordinatorId } from "./coordinator-id.js";
import { serialOf } from "./device-service.js";
import type { AgentServiceDeps } from "./service-deps.js";

/** The longest a tunnel holds a phone; the coordinator closes it well before, when the lease ends. */
export const ADB_TUNNEL_MAX_MS = 24 * 3_600_000;
const MAX_REASON_CHARS = 200;
const MAX_CLEANUP_DIRS = 200;
const PACKAGE = /^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$/;
const SETTING_KEY = /^[A-Za-z0-9_.-]{1,128}$/;

/** Directories a cleanup walks: absolute, normalized, never the root (the coordinator checked them; trust nothing across a boundary). */
function cleanupDirs(dirs: readonly string[], field: string): string[] {
  if (dirs.length > MAX_CLEANUP_DIRS) throw invalidArgument(field, `at most ${MAX_CLEANUP_DIRS} directories`);
  return dirs.map((d, i) => {
    const parts = d.split("/").filter(Boolean);
    if (!d.startsWith("/") || d.length > 512 || parts.length === 0 || parts.some((p) => p === "." || p === "..") || /[\x00-\x1f\x7f]/.test(d)) {
      throw invalidArgument(`${field}[${i}]`, "an absolute directory below the root");
    }
    return `/${parts.join("/")}`;
  });
}

/** What the coordinator itself asks of this agent: interactive shells, remote adb tunnels and draining. */
export function agentControlService(deps: AgentServiceDeps): ServiceImpl<typeof AgentControlService> {
  return {
    async startShell(req, ctx) {
      const c = callContext(ctx);
      let started!: (id: string) => void;
      const startedPromise = new Promise<string>((resolve) => (started = resolve));
      // The session outlives this call: it runs until the terminal exits.
      const session = deps.ownership.run(
        deps.interactiveShell,
        { command: req, onStarted: (id) => started(id) },
        { serial: serialOf(req.target), deadlineMs: c.deadlineMs, requestedBy: c.requestedBy, runDeadlineMs: Date.now() + 24 * 3_600_000 },
      );
      session.catch((err: unknown) => deps.log.warn("interactive shell ended with an error", { error: (err as Error).message }));
      const actionId = await Promise.race([
        startedPromise,
        session.then(() => {
          throw new Error("the shell ended before it started");
        }),
      ]);
      return { actionId };
    },
    async startAdbTunnel(req, ctx) {
      const c = callContext(ctx);
      const serial = serialOf(req.target);
      const tunnel = deps.adbTunnels.reserve(req.tunnelId, serial, c.requestedBy, req.leaseId);
      let started!: (id: string) => void;
      const startedPromise = new Promise<string>((resolve) => (started = resolve));
      // The tunnel outlives this call: its action holds the phone until StopAdbTunnel or a lost coordinator.
      const run = deps.ownership.run(
        deps.rawAdb,
        { tunnel, onStarted: (id) => started(id) },
        { serial, deadlineMs: c.deadlineMs, requestedBy: c.requestedBy, runDeadlineMs: Date.now() + ADB_TUNNEL_MAX_MS },
      );
      deps.adbTunnels.track(tunnel, run);
      const actionId = await Promise.race([
        startedPromise,
        run.then(() => {
          throw farmError(Errors.INTERNAL, "the adb tunnel ended before it started");
        }),
      ]);
      deps.log.info("adb tunnel open", { tunnelId: req.tunnelId, serial, actionId, requestedBy: c.requestedBy });
      return { actionId };
    },
    async stopAdbTunnel(req, ctx) {
      if (req.reason.length > MAX_REASON_CHARS) throw invalidArgument("reason", `a reason is at most ${MAX_REASON_CHARS} characters`);
      await deps.adbTunnels.stop(req.tunnelId, req.reason || "closed", hopDeadline(callContext(ctx).deadlineMs));
      return {};
    },
    async startAdbStream(req, ctx) {
      await deps.adbTunnels.openStream(req, hopDeadline(callContext(ctx).deadlineMs));
      return {};
    },
    stopAdbStream(req) {
      deps.adbTunnels.stopStream(req);
      return {};
    },
    async endLease(req, ctx) {
      checkCoordinatorId(req.leaseId, "lease_id");
      if (req.reason.length > MAX_REASON_CHARS) throw invalidArgument("reason", `a reason is at most ${MAX_REASON_CHARS} characters`);
      const reason = req.reason || "ended";
      // The lease's tunnels close first (their actions settle as completed), then what a dead process left is abandoned.
      await deps.adbTunnels.stopLease(req.leaseId, `lease ${reason}`, hopDeadline(callContext(ctx).deadlineMs));
      const settled = deps.ownership.endLease(RAW_ADB_KIND, req.leaseId, reason);
      for (const a of settled) {
        deps.history.recordAfter({ physicalId: a.physicalId, serial: a.serial, kind: "action-abandoned", detail: `${a.actionId}: lease ended (${req.leaseId} ${reason})` }, deps.log);
        deps.log.warn("a remote adb tunnel's action left unresolved was abandoned: its lease ended", { actionId: a.actionId, leaseId: req.leaseId, reason });
      }
      return { abandonedActionIds: settled.map((a) => a.actionId) };
    },
    async readCleanupBaseline(req, ctx) {
      checkCoordinatorId(req.leaseId, "lease_id");
      const serial = serialOf(req.target);
      if (!deps.watcher.device(serial)) throw farmError(Errors.DEVICE_NOT_FOUND, `no device ${serial} on this agent`, "target.serial");
      const dirs = cleanupDirs(req.dirs, "dirs");
      const signal = AbortSignal.timeout(Math.max(0, hopDeadline(callContext(ctx).deadlineMs) - Date.now()));
      return { baseline: await deps.readBaseline(serial, dirs, signal) };
    },
    async cleanPhone(req, ctx) {
      const c = callContext(ctx);
      checkCoordinatorId(req.leaseId, "lease_id");
      const policy = req.policy;
      if (!policy) throw invalidArgument("policy", "a cleanup policy is required");
      for (const [i, s] of policy.settings.entries()) {
        if (!["system", "secure", "global"].includes(s.namespace)) throw invalidArgument(`policy.settings[${i}].namespace`, "system, secure or global");
        if (!SETTING_KEY.test(s.key) || s.value.length > 256 || /[\x00-\x1f\x7f]/.test(s.value)) throw invalidArgument(`policy.settings[${i}]`, "not a setting a cleanup may put");
      }
      for (const [i, p] of [...policy.clearData, ...policy.keepPackages].entries()) {
        if (!PACKAGE.test(p)) throw invalidArgument(`policy.packages[${i}]`, "not an Android package name");
      }
      const plan = {
        uninstallInstalled: policy.uninstallInstalled,
        keepPackages: policy.keepPackages,
        clearData: policy.clearData,
        removeNewFilesUnder: cleanupDirs(policy.removeNewFilesUnder, "policy.remove_new_files_under"),
        settings: policy.settings.map((s) => ({ namespace: s.namespace, key: s.key, value: s.value })),
        airplaneModeOff: policy.airplaneModeOff,
        pressHome: policy.pressHome,
      };
      for (const [i, s] of (req.baseline?.settings ?? []).entries()) {
        if (!["system", "secure", "global"].includes(s.namespace)) throw invalidArgument(`baseline.settings[${i}].namespace`, "system, secure or global");
        if (!SETTING_KEY.test(s.key) || s.value.length > 256 || /[\x00-\x1f\x7f]/.test(s.value)) throw invalidArgument(`baseline.settings[${i}]`, "not a setting a cleanup may put back");
      }
      const baseline = {
        packages: req.baseline?.packages ?? [],
        paths: req.baseline?.paths ?? [],
        settings: (req.baseline?.settings ?? []).map((s) => ({ namespace: s.namespace, key: s.key, value: s.value })),
      };
      const { action, result } = await deps.ownership.run(deps.cleanup, { leaseId: req.leaseId, plan, baseline }, { serial: serialOf(req.target), deadlineMs: c.deadlineMs, requestedBy: c.requestedBy });
      return { actionId: action.actionId, steps: result.steps, ok: result.steps.every((s) => s.ok) };
    },
    startScreen(req) {
      // Reads only: the phone must be one this agent sees, and nothing is locked.
      const serial = serialOf(req.target);
      if (!deps.watcher.device(serial)) throw farmError(Errors.DEVICE_NOT_FOUND, `no device ${serial} on this agent`, "target.serial");
      checkCoordinatorId(req.streamId, "stream_id");
      deps.screens.start(req.streamId, serial);
      return {};
    },
    startLogcat(req) {
      // Reads only, like the live screen: a phone this agent sees, nothing locked.
      const serial = serialOf(req.target);
      if (!deps.watcher.device(serial)) throw farmError(Errors.DEVICE_NOT_FOUND, `no device ${serial} on this agent`, "target.serial");
      checkCoordinatorId(req.streamId, "stream_id");
      deps.logcats.start(req.streamId, serial);
      return {};
    },
    drain(req) {
      deps.onDrainRequested(req.reason);
      return {};
    },
  };
}
