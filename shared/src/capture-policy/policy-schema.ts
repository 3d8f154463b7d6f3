import { POLICY_ACTIONS } from "./actions.js";
import { CAPTURE_TOKENS } from "./capture-token.js";

/** A logcat filterspec: TAG:LEVEL pairs separated by spaces. It runs in the phone's shell, so nothing else is let through. */
export const LOG_FILTERSPEC_PATTERN = "^[A-Za-z0-9_.*/-]+:[VDIWEFS](?: +[A-Za-z0-9_.*/-]+:[VDIWEFS])*$";
/** An Android package name. */
export const PACKAGE_PATTERN = "^[A-Za-z][A-Za-z0-9_]*(?:\\.[A-Za-z][A-Za-z0-9_]*)+$";

/** Bounds of a policy: the schema enforces them, docs/session-policy.md lists them. */
export const POLICY_LIMITS = {
  rules: 100,
  tokensPerList: 50,
  secrets: 64,
  redactEntries: 100,
  idMatchesLength: 256,
  stringLength: 256,
  filterspecLength: 1024,
} as const;

const stringList = (description: string, item: Record<string, unknown> = {}) => ({
  description,
  type: "array",
  maxItems: POLICY_LIMITS.redactEntries,
  items: { type: "string", minLength: 1, maxLength: POLICY_LIMITS.stringLength, ...item },
});

/**
 * The published JSON Schema of a session policy: docs/session-policy.schema.json
 * is this object, written out (a test holds them equal), and parsePolicy
 * validates with it, so the file in docs/ is exactly what the code enforces.
 */
export const sessionPolicySchema = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: "https://farm.dev/schemas/session-policy-v1.json",
  title: "farm session policy",
  description: "What a recorded session captures per step beyond its baseline before/after screenshots, and what it masks. See docs/session-policy.md.",
  type: "object",
  additionalProperties: false,
  properties: {
    $schema: { description: "This schema's URL or path, for editors; ignored by farm.", type: "string", maxLength: 1024 },
    capture: { $ref: "#/$defs/captureList", description: "Captured on every step (the default rule)." },
    capturePolicy: {
      description: "Rules: each adds captures on the steps its trigger fires on.",
      type: "array",
      maxItems: POLICY_LIMITS.rules,
      items: { $ref: "#/$defs/rule" },
    },
    redact: {
      description: "What is masked before anything is stored.",
      type: "object",
      additionalProperties: false,
      properties: {
        labels: stringList("Element labels (resource id, text or content description) whose values are masked in element trees."),
        fields: stringList("JSON field names whose values are masked."),
        headers: stringList("Header names masked in addition to the defaults.", { pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$", description: "an HTTP header name" }),
        unmaskHeaders: stringList("Default-masked header names not to mask.", { pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$", description: "an HTTP header name" }),
      },
    },
    secrets: {
      description: "Names of environment variables of the CLI that starts the session; their values are masked. The file never holds values.",
      type: "array",
      maxItems: POLICY_LIMITS.secrets,
      uniqueItems: true,
      items: { type: "string", pattern: "^[A-Za-z_][A-Za-z0-9_]{0,127}$", description: "an environment variable name" },
    },
    log: {
      description: "Options of the deviceLog capture.",
      type: "object",
      additionalProperties: false,
      properties: {
        filterspec: {
          description: "a logcat filterspec: TAG:LEVEL pairs separated by spaces (\"*:W ActivityManager:I\")",
          type: "string",
          maxLength: POLICY_LIMITS.filterspecLength,
          pattern: LOG_FILTERSPEC_PATTERN,
        },
        package: {
          description: "an Android package name (com.example.app); only that app's lines are kept",
          type: "string",
          maxLength: POLICY_LIMITS.stringLength,
          pattern: PACKAGE_PATTERN,
        },
      },
    },
  },
  $defs: {
    captureToken: {
      description: "kind[.when]: screenshot and elements (before, after, around; default after), video and deviceLog (around), actionLog (always in the record).",
      enum: CAPTURE_TOKENS,
    },
    captureList: { type: "array", maxItems: POLICY_LIMITS.tokensPerList, items: { $ref: "#/$defs/captureToken" } },
    rule: {
      type: "object",
      additionalProperties: false,
      required: ["on", "capture"],
      properties: {
        on: { $ref: "#/$defs/trigger" },
        capture: { $ref: "#/$defs/captureList", type: "array", minItems: 1 },
      },
    },
    trigger: {
      description: "Exactly one of action (optionally with idMatches), event or result.",
      type: "object",
      additionalProperties: false,
      properties: {
        action: { description: "The step's action (longPress: none exists yet, never fires).", enum: POLICY_ACTIONS },
        idMatches: {
          description: "a glob against the step's primary target id (the element selector's resource id); * and ? also match : and /",
          type: "string",
          minLength: 1,
          maxLength: POLICY_LIMITS.idMatchesLength,
        },
        event: { description: "screenChanged: the screen changed during the step.", enum: ["screenChanged"] },
        result: { description: "error: the step failed.", enum: ["error"] },
      },
      dependentRequired: { idMatches: ["action"] },
      oneOf: [{ required: ["action"] }, { required: ["event"] }, { required: ["result"] }],
    },
  },
} as const;
