import { toJson, type JsonObject } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Errors } from "@farm/shared/errors";
import { validateContext } from "@farm/shared/evidence-options";
import { SessionStatus, SessionStepSchema, type Session, type SessionStep, type StepImage } from "@farm/shared/gen/farm/v1/session_service_pb";
import { CliError } from "../cli-error.js";
import { table } from "../output.js";
import { clientSession, type ClientSession } from "../session.js";
import type { sessionEndOptions, sessionListOptions, sessionShowOptions, sessionStartOptions, SESSION_STATUSES } from "../tree/session-commands.js";
import type { Action } from "../tree/spec.js";
import { sessionPolicyInput, type SessionPolicyInput } from "../session-policy-input.js";
import { asCli } from "./device-target.js";
import { libraryClient } from "./library-client.js";

type StatusWord = (typeof SESSION_STATUSES)[number];

const statusByWord: Readonly<Record<StatusWord, SessionStatus>> = {
  running: SessionStatus.RUNNING,
  passed: SessionStatus.PASSED,
  failed: SessionStatus.FAILED,
  "lease-ended": SessionStatus.LEASE_ENDED,
};

/** The word the CLI prints for a status (the flag spelling: lease-ended). */
export function statusWord(s: SessionStatus): string {
  return (Object.keys(statusByWord) as StatusWord[]).find((w) => statusByWord[w] === s) ?? "unspecified";
}

export function sessionJson(s: Session | undefined) {
  if (!s) return null;
  return {
    sessionId: s.sessionId,
    name: s.name,
    status: statusWord(s.status),
    owner: s.owner,
    physicalId: s.physicalId,
    serial: s.serial,
    agentId: s.agentId,
    agentName: s.agentName,
    leaseId: s.leaseId,
    createdAt: s.createTime ? new Date(timestampMs(s.createTime)).toISOString() : null,
    endedAt: s.endTime ? new Date(timestampMs(s.endTime)).toISOString() : null,
    stepCount: s.stepCount,
    failedStepCount: s.failedStepCount,
    context: s.context ?? {},
    ocr: s.ocr,
  };
}

/** Starts a session under `lease` on `serial` (also used by `farm lease run --session`). */
export async function startSessionOn(
  session: ClientSession,
  target: { serial: string; agent?: string | undefined; lease: string | undefined },
  opts: { name?: string | undefined; context?: JsonObject; ocr?: boolean; policy?: SessionPolicyInput },
): Promise<Session> {
  const started = await asCli(
    libraryClient(session).startSession(target.serial, {
      lease: target.lease || undefined,
      agent: target.agent,
      name: opts.name,
      context: opts.context,
      ocr: opts.ocr,
      policyJson: opts.policy?.policyJson,
      secrets: opts.policy?.secrets,
    }),
  );
  return started.info;
}

/** Ends a session as passed or failed. */
export async function endSessionAs(session: ClientSession, sessionId: string, status: "passed" | "failed", timeoutMs = session.timeoutMs): Promise<Session | undefined> {
  return asCli(libraryClient(session).endSession(sessionId, status, { timeoutMs }));
}

function describe(s: ReturnType<typeof sessionJson>): string {
  if (!s) return "";
  return [
    `session ${s.sessionId}${s.name ? ` (${s.name})` : ""}: ${s.status}`,
    `  owner ${s.owner}, device ${s.physicalId} via ${s.agentName || s.agentId}/${s.serial}, lease ${s.leaseId}`,
    `  started ${s.createdAt}${s.endedAt ? `, ended ${s.endedAt}` : ""}, ${s.stepCount} steps${s.failedStepCount > 0 ? ` (${s.failedStepCount} failed)` : ""}${s.ocr ? ", ocr" : ""}`,
    ...(Object.keys(s.context).length > 0 ? [`  context ${JSON.stringify(s.context)}`] : []),
  ].join("\n");
}

export const startSession: Action<typeof sessionStartOptions> = async (input) => {
  const { opts, ctx } = input;
  // Bad input fails before the coordinator is asked.
  if (!opts.device) throw new CliError(Errors.INVALID_ARGUMENT, "--device is required (or FARM_DEVICE)", "device");
  const context = validateContext(opts.contextJson) as JsonObject;
  const policy = await sessionPolicyInput(opts.policy, opts.secret, ctx.env);
  const session = clientSession(input);
  const s = await startSessionOn(session, { serial: opts.device, agent: opts.agent, lease: opts.lease }, { name: opts.name, context, ocr: opts.ocr, policy });
  ctx.printer.result({ session: sessionJson(s) }, () => [s.sessionId, `export FARM_SESSION=${s.sessionId}`].join("\n"));
  return 0;
};

export const endSession: Action<typeof sessionEndOptions> = async (input) => {
  const { opts, ctx } = input;
  if (!opts.session) throw new CliError(Errors.INVALID_ARGUMENT, "--session is required (or FARM_SESSION)", "session");
  const s = await endSessionAs(clientSession(input), opts.session, opts.status);
  ctx.printer.result({ session: sessionJson(s) }, () => `session ${s?.sessionId}: ${statusWord(s?.status ?? SessionStatus.UNSPECIFIED)}`);
  return 0;
};

export const listSessions: Action<typeof sessionListOptions> = async (input) => {
  const { opts, ctx } = input;
  const rows = await asCli(libraryClient(clientSession(input)).sessions({ serial: opts.device, status: opts.status, owner: opts.user }));
  const sessions = rows.map((s) => sessionJson(s)).filter((s) => s !== null);
  const wide = ctx.printer.wide;
  ctx.printer.result({ sessions }, () =>
    table(
      ["SESSION", "NAME", "STATUS", "OWNER", "DEVICE", "STEPS", "STARTED", "ENDED", ...(wide ? ["LEASE", "ROUTE"] : [])],
      sessions.map((s) => [
        s.sessionId,
        s.name,
        s.status,
        s.owner,
        s.physicalId,
        s.failedStepCount > 0 ? `${s.stepCount} (${s.failedStepCount} failed)` : String(s.stepCount),
        s.createdAt ?? "",
        s.endedAt ?? "",
        ...(wide ? [s.leaseId, `${s.agentName}/${s.serial}`] : []),
      ]),
    ));
  return 0;
};

/** Every step of a session's timeline, oldest first (all pages); the run's stop signal (session.config) ends it. */
export async function listAllSteps(session: ClientSession, sessionId: string): Promise<SessionStep[]> {
  return asCli(libraryClient(session).sessionSteps(sessionId));
}

/** A step as protobuf JSON (camelCase, defaults left out, int64 as strings, timestamps as RFC 3339). */
export function stepJson(step: SessionStep): JsonObject {
  return toJson(SessionStepSchema, step) as JsonObject;
}

/**
 * One line of an image in the timeline: sha256's first 8, a still bundle's
 * file, a failed capture, or –. The bundle's evidence id is whole: it is
 * what `farm evidence pull` takes, and ids are never cut where they are
 * shown to be pasted (only physical ids are, with … and prefixes taken).
 */
function imageWord(i: StepImage | undefined): string {
  if (!i) return "–";
  if (i.sha256) return i.sha256.slice(0, 8);
  if (i.evidenceId) return `evidence:${i.evidenceId}/${i.path}`;
  if (i.errorCode) return `failed(${i.errorCode})`;
  return "–";
}

const oneLine = (text: string, max: number) => {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
};

/** `#3  tap  tap at (540, 1210)  → ok  (87 ms)  before:1a2b3c4d  after:5e6f7a8b  ocr:done(12)` */
export function stepLines(steps: readonly SessionStep[]): string[] {
  const rows = steps.map((st) => {
    const r = st.result;
    const outcome = r?.ok
      ? `ok${r.exitCode !== undefined ? ` (exit ${r.exitCode})` : ""}`
      : `${r?.errorCode || "FAILED"}: ${oneLine(r?.errorMessage ?? "", 100)}${r?.ambiguous ? " (ambiguous)" : ""}`;
    const ocr = st.ocr ? `  ocr:${st.ocr.status}${st.ocr.status === "done" ? `(${st.ocr.observations.length})` : ""}` : "";
    return [`#${st.sequence}`, st.action || "?", oneLine(st.description, 80), `→ ${outcome}  (${st.durationMs} ms)  before:${imageWord(st.before)}  after:${imageWord(st.after)}${ocr}`];
  });
  const widths = [0, 1, 2].map((i) => Math.max(0, ...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) => r.map((c, i) => (i < 3 ? c.padEnd(widths[i] ?? 0) : c)).join("  "));
}

export const showSession: Action<typeof sessionShowOptions> = async (input) => {
  const farm = libraryClient(clientSession(input));
  const id = input.args[0] ?? "";
  const got = await asCli(farm.session(id));
  const steps = await asCli(farm.sessionSteps(id));
  const s = sessionJson(got);
  input.ctx.printer.result({ session: s, steps: steps.map(stepJson) }, () => [describe(s), steps.length === 0 ? "  no steps recorded" : "timeline:", ...stepLines(steps).map((l) => `  ${l}`)].join("\n"));
  return 0;
};
