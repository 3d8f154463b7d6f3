import { Ajv2020 } from "ajv/dist/2020.js";
import type { ErrorObject } from "ajv";
import type { PolicyAction } from "./actions.js";
import { parseText, type DocumentSource } from "./document.js";
import { sessionPolicySchema } from "./policy-schema.js";
import { DocumentError, problemsOf, type Problem } from "./schema-errors.js";

export { DocumentError as PolicyError, type Problem as PolicyProblem };

export type Trigger = { action: PolicyAction; idMatches?: string } | { event: "screenChanged" } | { result: "error" };

export interface CaptureRule {
  on: Trigger;
  capture: string[];
}

/** A validated policy, as the file says it (tokens as written; rules/capture-token.ts applies defaults). */
export interface SessionPolicy {
  $schema?: string;
  capture?: string[];
  capturePolicy?: CaptureRule[];
  redact?: { labels?: string[]; fields?: string[]; headers?: string[]; unmaskHeaders?: string[] };
  secrets?: string[];
  log?: { filterspec?: string; package?: string };
}

/** A policy file is small; a steps file may be large. */
export const MAX_POLICY_BYTES = 256 * 1024;

type Validator = ((v: unknown) => boolean) & { errors?: ErrorObject[] | null };
let validator: Validator | undefined;

/** Compiled on first use: a CLI command that never reads a policy does not pay for it. */
function compiled(): Validator {
  validator ??= new Ajv2020({ allErrors: true, verbose: true, strict: true, strictRequired: false }).compile(sessionPolicySchema) as Validator;
  return validator;
}

/** Rule N (1-based, as steps' reasons say it) next to the JSON path (0-based) of anything inside a rule. */
function withRuleNumber(p: Problem): Problem {
  const m = /^capturePolicy\[(\d+)\]/.exec(p.path);
  return m ? { ...p, message: `${p.message} (rule ${Number(m[1]) + 1})` } : p;
}

/** Every problem of a parsed value against the published schema; empty when it is a policy. */
export function policyProblems(value: unknown): Problem[] {
  const v = compiled();
  if (v(value)) return [];
  return problemsOf(v.errors ?? [], "(policy)").map(withRuleNumber);
}

/** A parsed value checked against the schema; throws PolicyError listing every problem. */
export function validatePolicy(value: unknown): SessionPolicy {
  const problems = policyProblems(value);
  if (problems.length > 0) throw new DocumentError("the session policy", problems);
  return value as SessionPolicy;
}

/** A policy file's text (YAML or JSON) to a validated policy; throws PolicyError listing every problem. */
export function parsePolicy(text: string, source: DocumentSource = "auto"): SessionPolicy {
  return validatePolicy(parseText(text, source, "the session policy", MAX_POLICY_BYTES));
}

/** The policy filled with a site default: `capture` only when the policy does not set it (an empty list is a choice). */
export function withSiteDefault(policy: SessionPolicy, siteDefault: readonly string[] | undefined): SessionPolicy {
  return policy.capture !== undefined || siteDefault === undefined ? policy : { ...policy, capture: [...siteDefault] };
}
