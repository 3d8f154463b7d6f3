import type { Lease } from "@farm/shared/gen/farm/v1/lease_pb";
import type { SessionStep } from "@farm/shared/gen/farm/v1/session_service_pb";

/** One failed step of the session: its place in the timeline and why. */
export interface FailedStep {
  sequence: number;
  action: string;
  errorCode: string;
  errorMessage: string;
}

/**
 * What `farm lease run` did, for a CI job to read after its command ended.
 * Fields farm did not observe are null (a model the registry did not report,
 * steps of a session that could not be read), never guessed.
 */
export interface LeaseRunSummary {
  /** True when the command exited 0. */
  ok: boolean;
  leaseId: string;
  phone: { serial: string; physicalId: string; model: string | null; agentName: string };
  sessionId: string | null;
  /** passed or failed as the session was ended; null without a session or when ending it failed. */
  sessionStatus: string | null;
  steps: number | null;
  failedSteps: FailedStep[] | null;
  exitCode: number;
  /** The session export's manifest, when --export wrote one; null otherwise (not asked, or it failed: see stderr). */
  exportPath: string | null;
  /** The signal that ended the command, when one did. */
  signal: string | null;
}

/** A step failed when its result says so; a step without a result yet is not counted as failed. */
export function failedStepsOf(steps: readonly SessionStep[]): FailedStep[] {
  return steps
    .filter((s) => s.result !== undefined && !s.result.ok)
    .map((s) => ({ sequence: s.sequence, action: s.action, errorCode: s.result?.errorCode ?? "", errorMessage: s.result?.errorMessage ?? "" }));
}

export function leaseRunSummary(input: {
  lease: Lease;
  model: string | undefined;
  sessionId: string | undefined;
  sessionStatus: string | undefined;
  steps: readonly SessionStep[] | undefined;
  exitCode: number;
  exportPath: string | undefined;
  signal: NodeJS.Signals | undefined;
}): LeaseRunSummary {
  const { lease, steps } = input;
  return {
    ok: input.exitCode === 0,
    leaseId: lease.leaseId,
    phone: { serial: lease.serial, physicalId: lease.physicalId, model: input.model ?? null, agentName: lease.agentName },
    sessionId: input.sessionId ?? null,
    sessionStatus: input.sessionStatus ?? null,
    steps: steps ? steps.length : null,
    failedSteps: steps ? failedStepsOf(steps) : null,
    exitCode: input.exitCode,
    exportPath: input.exportPath ?? null,
    signal: input.signal ?? null,
  };
}

/** The pretty form: one line on stderr for people. */
export function summaryLine(s: LeaseRunSummary): string {
  const steps = s.steps === null ? "" : `, ${s.steps} step${s.steps === 1 ? "" : "s"}, ${s.failedSteps?.length ?? 0} failed`;
  return `farm lease run: ${s.phone.physicalId} (${s.phone.serial}) exit ${s.exitCode}${s.signal ? ` (${s.signal})` : ""}${s.sessionId ? `, session ${s.sessionId} ${s.sessionStatus ?? "not ended"}` : ""}${steps}`;
}
