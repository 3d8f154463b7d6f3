import { create } from "@bufbuild/protobuf";
import { toErrorReport } from "@farm/shared/errors";
import type { CleanupPolicyDoc } from "@farm/shared/cleanup/cleanup-policy";
import type { Logger } from "@farm/shared/log";
import { AgentControlService, CleanupPolicySchema } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import type { ActivityLog } from "../activity/activity-log.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { LeaseRow } from "../leases/lease-store.js";
import type { Registry } from "../registry/registry.js";
import type { AgentCaller } from "../routing/agent-session.js";
import type { Baseline, DeviceCleanups } from "./device-cleanups.js";

/** Who the farm's own cleanup actions are journaled as (agent journal and activity). */
export const CLEANUP_CALLER = "farm:cleanup";
/** How long reading a phone's baseline may take at grant (the holder waits for it). */
const BASELINE_TIMEOUT_MS = 30_000;
const FARM = { tokenName: CLEANUP_CALLER, admin: false };

export interface LeaseCleanupDeps {
  registry: Registry;
  leases: LeaseManager;
  cleanups: DeviceCleanups;
  activity: ActivityLog;
  policy: CleanupPolicyDoc;
  log: Logger;
  /** Tells the agent the lease ended (its tunnels close) before the cleanup runs. */
  endLeaseOnAgent(lease: LeaseRow): Promise<void>;
}

/**
 * Cleans phones between users (farm coordinator --cleanup): at grant, the
 * phone's baseline is read before the holder gets the token; when the
 * lease ends (release, expiry, revoke, lease-run end) the phone is held out
 * of the pool at once, its agent runs the policy's steps, and the phone
 * comes back only if every step succeeded: otherwise it is needs-attention
 * with the reason. A cleanup that hangs is cut at the policy's timeout.
 */
export function cleanPhonesBetweenUsers(deps: LeaseCleanupDeps): { idle(): Promise<void> } {
  const running = new Set<Promise<void>>();
  deps.leases.onGranted((lease) => readBaseline(deps, lease));
  deps.leases.onEnding((lease) => {
    const begun = deps.cleanups.beginCleaning(lease);
    if (!begun.started) return;
    const run = begun.stored
      .then(() => clean(deps, lease))
      .catch((err: unknown) =>
        deps.log.error("a phone's cleanup could not be recorded; it stays out of the pool until the next start marks it needs-attention", { leaseId: lease.leaseId, physicalId: lease.physicalId, error: (err as Error).message })
      )
      .finally(() => running.delete(run));
    running.add(run);
  });
  return {
    /** Resolves once the cleanups running now have finished (tests, shutdown). */
    async idle() {
      while (running.size > 0) await Promise.all([...running]);
    },
  };
}

async function readBaseline(deps: LeaseCleanupDeps, lease: LeaseRow): Promise<void> {
  const t0 = Date.now();
  const dirs = deps.policy.removeNewFilesUnder;
  const attached = deps.registry.agentSession(lease.agentId);
  let problem = "";
  let baseline: Baseline | undefined;
  if (!attached) problem = "its agent was offline when the lease was granted: no baseline to clean against";
  else {
    try {
      const res = await (attached.session as AgentCaller).call(
        AgentControlService.method.readCleanupBaseline,
        { target: { serial: lease.serial }, leaseId: lease.leaseId, dirs },
        FARM,
        Date.now() + BASELINE_TIMEOUT_MS,
      );
      baseline = {
        packages: res.baseline?.packages ?? [],
        paths: res.baseline?.paths ?? [],
        settings: (res.baseline?.settings ?? []).map((s) => ({ namespace: s.namespace, key: s.key, value: s.value })),
      };
    } catch (err) {
      const r = toErrorReport(err);
      problem = `its baseline could not be read at grant (${r.code}: ${r.message})`;
    }
  }
  await deps.cleanups.recordBaseline(lease, baseline, problem);
  await record(
    deps,
    lease,
    "cleanup.baseline",
    problem === "" ? "ok" : "CLEANUP_FAILED",
    Date.now() - t0,
    problem || `${baseline?.packages.length ?? 0} packages, ${baseline?.paths.length ?? 0} entries under ${dirs.join(", ") || "no directory"}`,
  );
}

async function clean(deps: LeaseCleanupDeps, lease: LeaseRow): Promise<void> {
  const t0 = Date.now();
  const fail = async (reason: string) => {
    await deps.cleanups.needsAttention(lease, reason);
    await record(deps, lease, "cleanup", "CLEANUP_FAILED", Date.now() - t0, reason);
    deps.log.warn("a phone's cleanup failed: it needs attention", { leaseId: lease.leaseId, physicalId: lease.physicalId, serial: lease.serial, reason });
  };
  // Its tunnels close (and what they left settles) first: nothing of the holder's runs beside the cleanup.
  await deps.endLeaseOnAgent(lease);
  const base = deps.cleanups.baselineOf(lease);
  if ("problem" in base) return fail(`not cleaned: ${base.problem}`);
  const attached = deps.registry.agentSession(lease.agentId);
  if (!attached) return fail("not cleaned: its agent was offline when the lease ended");
  const p = deps.policy;
  let res;
  try {
    res = await (attached.session as AgentCaller).call(
      AgentControlService.method.cleanPhone,
      {
        target: { serial: lease.serial },
        leaseId: lease.leaseId,
        policy: create(CleanupPolicySchema, {
          uninstallInstalled: p.uninstallInstalled,
          keepPackages: p.keepPackages,
          clearData: p.clearData,
          removeNewFilesUnder: p.removeNewFilesUnder,
          settings: p.settings,
          airplaneModeOff: p.airplaneModeOff,
          pressHome: p.pressHome,
        }),
        baseline: base.baseline,
      },
      FARM,
      Date.now() + p.timeoutMs,
    );
  } catch (err) {
    const r = toErrorReport(err);
    const timedOut = r.code === "DEADLINE_EXCEEDED" || r.code === "COMMAND_TIMEOUT";
    return fail(timedOut ? `the cleanup did not finish within ${p.timeoutMs / 1000} s (${r.message})` : `the cleanup failed: ${r.code}: ${r.message}`);
  }
  for (const s of res.steps) await record(deps, lease, `cleanup.${s.action}`, s.ok ? "ok" : "CLEANUP_FAILED", 0, s.ok ? s.target : `${s.target}: ${s.error}`);
  const failed = res.steps.filter((s) => !s.ok);
  if (failed.length > 0 || !res.ok) return fail(failed.map((s) => `${s.action} ${s.target} failed: ${s.error}`).join("; ").slice(0, 1000) || "the agent reported the cleanup incomplete");
  await deps.cleanups.cleaned(lease);
  await record(deps, lease, "cleanup", "ok", Date.now() - t0, `${res.steps.length} steps (agent action ${res.actionId})`);
  deps.log.info("phone cleaned after its lease", { leaseId: lease.leaseId, physicalId: lease.physicalId, serial: lease.serial, steps: res.steps.length });
}

function record(deps: LeaseCleanupDeps, lease: LeaseRow, command: string, outcome: string, durationMs: number, detail: string): Promise<void> {
  return deps.activity.recordAfter({
    at: Date.now(),
    caller: CLEANUP_CALLER,
    leaseId: lease.leaseId,
    serial: lease.serial,
    physicalId: lease.physicalId,
    agentId: lease.agentId,
    command,
    outcome,
    durationMs,
    requestId: "",
    detail: detail.slice(0, 2000),
  });
}
