import { Ajv2020 } from "ajv/dist/2020.js";
import type { ErrorObject } from "ajv";
import { normalizeStepAction, STEP_ACTIONS } from "./actions.js";
import { CAPTURE_TOKENS } from "./capture-token.js";
import { parseText, type DocumentSource } from "./document.js";
import { POLICY_LIMITS } from "./policy-schema.js";
import { DocumentError, problemsOf } from "./schema-errors.js";

/** A step of a scenario: what explain needs to know of it. */
export interface ScenarioStep {
  /** 1, 2, ... (a steps file: its position; a recorded session: the step's sequence). */
  sequence: number;
  action: string;
  /** The primary target id; "" when none. */
  targetId: string;
  screenChanged: boolean;
  failed: boolean;
  /** Per-action tokens, as `--capture` would give them. */
  capture?: string[];
}

export const MAX_SCENARIO_STEPS = 100_000;
export const MAX_STEPS_BYTES = 32 * 1024 * 1024;

/** The steps file (`farm session explain --steps FILE`): a list of {action, id?, screenChanged?, failed?, capture?}. */
export const scenarioStepsSchema = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  title: "farm session explain steps",
  type: "array",
  maxItems: MAX_SCENARIO_STEPS,
  items: {
    type: "object",
    additionalProperties: false,
    required: ["action"],
    properties: {
      action: { enum: [...STEP_ACTIONS, "type", "longPress"] },
      id: { type: "string", maxLength: POLICY_LIMITS.stringLength },
      screenChanged: { type: "boolean" },
      failed: { type: "boolean" },
      capture: { type: "array", maxItems: POLICY_LIMITS.tokensPerList, items: { enum: CAPTURE_TOKENS } },
    },
  },
} as const;

interface RawStep {
  action: string;
  id?: string;
  screenChanged?: boolean;
  failed?: boolean;
  capture?: string[];
}

type Validator = ((v: unknown) => boolean) & { errors?: ErrorObject[] | null };
let validator: Validator | undefined;

/** A steps file's text (YAML or JSON) to scenario steps; throws DocumentError listing the problems. */
export function parseSteps(text: string, source: DocumentSource = "auto"): ScenarioStep[] {
  const value = parseText(text, source, "the steps file", MAX_STEPS_BYTES);
  validator ??= new Ajv2020({ allErrors: true, verbose: true, strict: true, strictRequired: false }).compile(scenarioStepsSchema) as Validator;
  if (!validator(value)) throw new DocumentError("the steps file", problemsOf(validator.errors ?? [], "steps"));
  return (value as RawStep[]).map((s, i) => ({
    sequence: i + 1,
    action: normalizeStepAction(s.action),
    targetId: s.id ?? "",
    screenChanged: s.screenChanged === true,
    failed: s.failed === true,
    ...(s.capture ? { capture: s.capture } : {}),
  }));
}
