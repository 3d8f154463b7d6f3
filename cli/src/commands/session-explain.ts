import { readFile } from "node:fs/promises";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Errors } from "@farm/shared/errors";
import { sourceOfPath } from "@farm/shared/capture-policy/document";
import { BYTE_ESTIMATES, compactSequences, explainPolicy, formatBytes, type PolicyExplanation, type PolicyNote } from "@farm/shared/capture-policy/explain";
import { parsePolicy, type SessionPolicy } from "@farm/shared/capture-policy/policy";
import { DocumentError } from "@farm/shared/capture-policy/schema-errors";
import { parseSteps, type ScenarioStep } from "@farm/shared/capture-policy/steps";
import type { SessionStep } from "@farm/shared/gen/farm/v1/session_service_pb";
import { CliError } from "../cli-error.js";
import { table } from "../output.js";
import { clientSession } from "../session.js";
import type { sessionExplainOptions } from "../tree/session-commands.js";
import type { Action } from "../tree/spec.js";
import { listAllSteps } from "./session.js";

/**
 * `farm session explain`: a dry run of a capture policy over a scenario
 * (a steps file, or a recorded session's timeline). Reads, changes nothing.
 */

const obj = (v: JsonValue | undefined): JsonObject | undefined => (typeof v === "object" && v !== null && !Array.isArray(v) ? v : undefined);
const str = (v: JsonValue | undefined): string => (typeof v === "string" ? v : "");

/**
 * A recorded step in scenario form. The target id is the selector's resource
 * id, else the resolved element's. screenChanged is approximated by the
 * before and after screenshots differing (the pixels changed; a blinking
 * cursor counts, an element tree change behind the same pixels does not);
 * unknown when either is missing.
 */
export function scenarioFromSessionSteps(steps: readonly SessionStep[]): ScenarioStep[] {
  return steps.map((st) => {
    const selectorId = str(obj(obj(obj(st.arguments)?.["tap"])?.["element"])?.["resourceId"]);
    const resolvedId = str(obj(obj(obj(st.result?.response)?.["element"])?.["element"])?.["resourceId"]);
    const before = st.before?.sha256 ?? "";
    const after = st.after?.sha256 ?? "";
    return {
      sequence: st.sequence,
      action: st.action,
      targetId: selectorId || resolvedId,
      screenChanged: before !== "" && after !== "" && before !== after,
      failed: !st.result?.ok,
    };
  });
}

async function readText(path: string, flag: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    throw new CliError(Errors.INVALID_ARGUMENT, `cannot read --${flag} ${path}: ${(err as Error).message}`, flag);
  }
}

/** A document's problems as the CLI's refusal, one per line. */
function refusal(err: unknown, path: string, flag: string, what: string): unknown {
  if (!(err instanceof DocumentError)) return err;
  const n = err.problems.length;
  const lines = err.problems.map((p) => `  ${p.path}: ${p.message}`);
  return new CliError(Errors.INVALID_ARGUMENT, `--${flag} ${path} is not ${what} (${n} problem${n === 1 ? "" : "s"}):\n${lines.join("\n")}`, flag);
}

/** The policy file, validated against docs/session-policy.schema.json. */
export async function readPolicyFile(path: string): Promise<SessionPolicy> {
  const text = await readText(path, "policy");
  try {
    return parsePolicy(text, sourceOfPath(path));
  } catch (err) {
    throw refusal(err, path, "policy", "a valid session policy");
  }
}

async function readStepsFile(path: string): Promise<ScenarioStep[]> {
  const text = await readText(path, "steps");
  try {
    return parseSteps(text, sourceOfPath(path));
  } catch (err) {
    throw refusal(err, path, "steps", "a valid steps file");
  }
}

/** Secrets named by the policy but not set here: starting a session from this environment would have no value for them. */
function secretNotes(policy: SessionPolicy, env: NodeJS.ProcessEnv): PolicyNote[] {
  return (policy.secrets ?? [])
    .filter((name) => !env[name])
    .map((name) => ({ rule: "secrets", message: `${name} is not set in this environment (a secret's value comes from the environment of the CLI that starts the session)` }));
}

function policySummary(policy: SessionPolicy): string[] {
  const r = policy.redact ?? {};
  const count = (n: number | undefined, word: string) => (n ? [`${n} ${word}${n === 1 ? "" : "s"}`] : []);
  const redact = [...count(r.labels?.length, "label"), ...count(r.fields?.length, "field"), ...count(r.headers?.length, "header"), ...count(r.unmaskHeaders?.length, "unmasked header")];
  const log = [...(policy.log?.filterspec ? [`filterspec ${JSON.stringify(policy.log.filterspec)}`] : []), ...(policy.log?.package ? [`package ${policy.log.package}`] : [])];
  return [
    ...(policy.secrets?.length ? [`secrets: ${policy.secrets.join(", ")}`] : []),
    ...(redact.length ? [`redact: ${redact.join(", ")}`] : []),
    ...(log.length ? [`deviceLog: ${log.join(", ")}`] : []),
  ];
}

function pretty(e: PolicyExplanation, heading: string, policy: SessionPolicy, notes: readonly PolicyNote[]): string {
  const out = [heading, ...policySummary(policy).map((l) => `  ${l}`), ""];
  if (e.rules.length === 0) out.push("no rules and no default captures: each step keeps only its before/after screenshots");
  else {
    out.push(
      table(
        ["RULE", "TRIGGER", "CAPTURES", "FIRES", "STEPS", "EST."],
        e.rules.map((r) => [r.rule, `${r.trigger}${r.speculative ? " (speculative)" : ""}`, r.captures.join(", "), String(r.fires), compactSequences(r.sequences, 8), formatBytes(r.estimatedBytes)]),
      ),
    );
  }
  if (e.rules.some((r) => r.speculative)) out.push("(speculative): its video, deviceLog and .before captures start on every step and are kept only where it fires");
  if (e.warnings.length > 0) out.push("", ...e.warnings.map((w) => `⚠ ${w.message}`));
  if (notes.length > 0) out.push("", ...notes.map((n) => `note: ${n.message}`));
  out.push(
    "",
    "estimated storage (upper bounds; identical screenshots are stored once):",
    table(
      ["KIND", "CAPTURES", "EST.", "SPECULATED, DISCARDED"],
      [
        ...e.totals.map((t) => [t.kind, String(t.captures), formatBytes(t.estimatedBytes), t.speculativeDiscarded > 0 ? String(t.speculativeDiscarded) : t.kind === "screenshot" ? "– (baseline before/after)" : "–"]),
        ["total", "", formatBytes(e.estimatedBytes), ""],
      ],
    ),
  );
  return out.join("\n");
}

export const explainSession: Action<typeof sessionExplainOptions> = async (input) => {
  const { opts, sources, ctx } = input;
  // --steps wins over a FARM_SESSION exported in this shell; two flags are a mistake.
  if (opts.steps !== undefined && sources.session === "flag") throw new CliError(Errors.INVALID_ARGUMENT, "give --steps FILE or --session ID, not both", "steps");
  if (opts.steps === undefined && !opts.session) throw new CliError(Errors.INVALID_ARGUMENT, "give --steps FILE (a scenario) or --session ID (a recorded session, or FARM_SESSION)", "steps");
  const policy = await readPolicyFile(opts.policy);
  let steps: ScenarioStep[];
  let scenario: { source: "steps"; file: string } | { source: "session"; sessionId: string };
  if (opts.steps !== undefined) {
    steps = await readStepsFile(opts.steps);
    scenario = { source: "steps", file: opts.steps };
  } else {
    const sessionId = opts.session ?? "";
    steps = scenarioFromSessionSteps(await listAllSteps(clientSession(input), sessionId));
    scenario = { source: "session", sessionId };
  }
  const e = explainPolicy(policy, steps);
  const notes = [...e.notes, ...secretNotes(policy, ctx.env)];
  const from = scenario.source === "steps" ? `steps file ${scenario.file}` : `session ${scenario.sessionId}`;
  ctx.printer.result({ policy: { file: opts.policy, ...policy }, scenario, ...e, notes, byteEstimates: BYTE_ESTIMATES }, () => pretty(e, `policy ${opts.policy} over ${e.steps} step${e.steps === 1 ? "" : "s"} (${from})`, policy, notes));
  return 0;
};
