import type { ErrorObject } from "ajv";
import { captureTokenProblem, CAPTURE_TOKENS } from "./capture-token.js";

/** One thing wrong with a document, at a path people read: `capturePolicy[1].on.idMatches`. */
export interface Problem {
  path: string;
  message: string;
}

/** Past this many, the rest are counted, not listed (a 10,000-step file with one systematic typo). */
export const MAX_PROBLEMS = 50;

/** A document that did not parse or validate: every problem found, each with its path. */
export class DocumentError extends Error {
  constructor(
    readonly what: string,
    readonly problems: readonly Problem[],
  ) {
    super(`${what} is not valid:\n${problems.map((p) => `  ${p.path}: ${p.message}`).join("\n")}`);
    this.name = "DocumentError";
  }
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** `/capturePolicy/1/on` -> `capturePolicy[1].on`; `root` names an empty path and prefixes a leading index. */
export function readablePath(pointer: string, root: string, extra?: string): string {
  const segments = pointer === "" ? [] : pointer.slice(1).split("/").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (extra !== undefined) segments.push(extra);
  let out = "";
  for (const s of segments) {
    if (/^(0|[1-9]\d*)$/.test(s)) out += `[${s}]`;
    else if (IDENT.test(s)) out += out === "" ? s : `.${s}`;
    else out += `[${JSON.stringify(s)}]`;
  }
  if (out === "") return root;
  return out.startsWith("[") ? `${root}${out}` : out;
}

const typeWords: Record<string, string> = { object: "a mapping (object)", array: "a list", string: "a string", boolean: "true or false", integer: "an integer", number: "a number" };

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** What the items of a list are called in a message, by the list's key. */
function itemsWord(pointer: string): string {
  const last = pointer.split("/").pop() ?? "";
  if (last === "capturePolicy") return "rule";
  if (last === "capture") return "capture token";
  if (last === "secrets") return "secret name";
  if (pointer === "") return "step";
  return "entry";
}

/** Case slips and the timeline's word for the policy's. */
function hint(value: unknown, allowed: readonly unknown[]): string {
  if (typeof value !== "string") return "";
  if (value === "text" && allowed.includes("type")) return " (the policy calls text input `type`)";
  const near = allowed.find((a) => typeof a === "string" && a.toLowerCase() === value.toLowerCase());
  return near ? ` (did you mean ${String(near)}?)` : "";
}

const sameList = (a: readonly unknown[], b: readonly unknown[]) => a.length === b.length && a.every((v, i) => v === b[i]);

function one(e: ErrorObject, root: string): Problem {
  const at = (extra?: string) => readablePath(e.instancePath, root, extra);
  const p = e.params as Record<string, unknown>;
  const parent = (e.parentSchema ?? {}) as Record<string, unknown>;
  const data = e.data as unknown;
  switch (e.keyword) {
    case "additionalProperties": {
      const key = String(p["additionalProperty"]);
      const known = Object.keys((parent["properties"] as object | undefined) ?? {});
      return { path: at(key), message: `unknown key; allowed here: ${known.join(", ")}` };
    }
    case "required":
      return { path: at(String(p["missingProperty"])), message: "is required" };
    case "dependentRequired":
      return { path: at(String(p["property"])), message: `${String(p["property"])} is allowed only with ${String(p["missingProperty"])}` };
    case "type":
      return { path: at(), message: `must be ${typeWords[String(p["type"])] ?? String(p["type"])}` };
    case "enum": {
      const allowed = (p["allowedValues"] as unknown[] | undefined) ?? [];
      if (sameList(allowed, CAPTURE_TOKENS)) return { path: at(), message: captureTokenProblem(data) ?? "is not a capture token" };
      return { path: at(), message: `${JSON.stringify(data)} is not one of: ${allowed.join(", ")}${hint(data, allowed)}` };
    }
    case "oneOf": {
      // The only oneOf is a rule's trigger: name the keys that compete.
      const keys = ["action", "event", "result"].filter((k) => typeof data === "object" && data !== null && k in data);
      return {
        path: at(),
        message: keys.length === 0 ? "needs a trigger: action, event or result" : `has ${keys.length} triggers (${keys.join(", ")}); a rule has exactly one`,
      };
    }
    case "maxItems":
      return { path: at(), message: `at most ${plural(Number(p["limit"]), itemsWord(e.instancePath))} (got ${Array.isArray(data) ? data.length : "?"})` };
    case "minItems":
      return { path: at(), message: `needs at least ${plural(Number(p["limit"]), itemsWord(e.instancePath))}` };
    case "maxLength":
      return { path: at(), message: `at most ${plural(Number(p["limit"]), "character")} (got ${typeof data === "string" ? data.length : "?"})` };
    case "minLength":
      return { path: at(), message: "must not be empty" };
    case "pattern": {
      // The description up to its first ";" is a noun phrase: "an environment variable name".
      const what = typeof parent["description"] === "string" ? parent["description"].split(";")[0] : `text matching ${String(p["pattern"])}`;
      return { path: at(), message: `${JSON.stringify(data)} is not ${what}` };
    }
    case "uniqueItems": {
      const [i, j] = [Number(p["i"]), Number(p["j"])];
      const item = Array.isArray(data) ? data[i] : undefined;
      return { path: at(), message: `${JSON.stringify(item)} is listed twice (items ${Math.min(i, j)} and ${Math.max(i, j)})` };
    }
    default:
      return { path: at(), message: e.message ?? `fails ${e.keyword}` };
  }
}

/**
 * Readable problems from ajv's errors (compiled with allErrors and verbose).
 * The failures inside a oneOf's branches are dropped: the oneOf's own
 * error says what is wrong.
 */
export function problemsOf(errors: readonly ErrorObject[], root: string): Problem[] {
  const seen = new Set<string>();
  const out: Problem[] = [];
  for (const e of errors) {
    if (e.schemaPath.includes("/oneOf/")) continue;
    const pr = one(e, root);
    const key = `${pr.path}\n${pr.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(pr);
  }
  return capProblems(out);
}

/** At most MAX_PROBLEMS, then one line counting the rest. */
export function capProblems(problems: Problem[]): Problem[] {
  if (problems.length <= MAX_PROBLEMS) return problems;
  return [...problems.slice(0, MAX_PROBLEMS), { path: "…", message: `and ${problems.length - MAX_PROBLEMS} more problems` }];
}
