import type { Transform } from "node:stream";
import { headerMasker, maskHeaderValue } from "./header-rules.js";
import { compileMatcher, REDACTION_MASK, scan, type Matcher } from "./matcher.js";
import { incrementalRedactor, redactionTransform, type IncrementalRedactor } from "./redaction-stream.js";
import { checkSecrets, type RedactionRules } from "./rules.js";
import { secretForms } from "./secret-forms.js";

export { DEFAULT_SENSITIVE_HEADERS } from "./header-rules.js";
export { REDACTION_MASK } from "./matcher.js";
export type { IncrementalRedactor } from "./redaction-stream.js";
export { MIN_SECRET_LENGTH, mergeRedactionRules, type RedactionRules } from "./rules.js";

export type HeaderPairs = Array<[string, string]>;
export type HeaderRecord = Record<string, string | string[] | undefined>;

/** A UI element (the generated `UiElement` or its init shape): only these fields are read. */
export interface UiNode {
  text?: string;
  resourceId?: string;
  contentDesc?: string;
  children?: readonly UiNode[];
}

/**
 * Masks secrets before anything leaves the host. Every method returns a
 * copy; inputs are never modified. Bytes (images, Uint8Array values) are
 * never masked.
 */
export interface Redactor {
  /** Every secret, in each of its encoded forms, and Basic credentials holding one, replaced by REDACTION_MASK. */
  text(s: string): string;
  /** A byte stream (logcat, a pulled file) masked chunk by chunk, secrets split across chunks included. */
  stream(): Transform;
  /** `text()` for strings that arrive in pieces. */
  incremental(): IncrementalRedactor;
  /** Sensitive headers' values masked; the others' values through `text()`. Same shape back. */
  headers(h: HeaderPairs): HeaderPairs;
  headers(h: HeaderRecord): HeaderRecord;
  /**
   * Deep copy: values under `fields` masked, `headers` objects as headers,
   * objects shaped as UI elements (a tree in a file) masked as `uiTree()`
   * masks a node, every string through `text()`.
   */
  json(value: unknown): unknown;
  /**
   * Deep copy: nodes labelled by `labels` get their text masked, a node's
   * string attributes named by `fields` are masked, every string through
   * `text()`. Other attributes (bounds, flags) keep their type.
   */
  uiTree<T extends UiNode>(roots: readonly T[]): T[];
  uiTree<T extends UiNode>(root: T): T;
}

/**
 * Builds a redactor; throws INVALID_ARGUMENT for a secret shorter than
 * MIN_SECRET_LENGTH characters or only whitespace.
 */
export function createRedactor(rules: RedactionRules): Redactor {
  const secrets = checkSecrets(rules.secrets);
  const needles = [...new Set(secrets.flatMap(secretForms))];
  const textMatcher = compileMatcher(needles, (token) => Buffer.from(token, "base64").toString("utf8"));
  // Streams match UTF-8 bytes read as latin1; built on first use.
  let byteMatcher: { m: Matcher | undefined } | undefined;
  const bytes = (): Matcher | undefined =>
    (byteMatcher ??= {
      m: compileMatcher(
        needles.map((n) => Buffer.from(n, "utf8").toString("latin1")),
        (token) => Buffer.from(token, "base64").toString("latin1"),
      ),
    }).m;

  const isMaskedHeader = headerMasker(rules.headers ?? [], rules.unmaskHeaders ?? []);
  const fields = new Set((rules.fields ?? []).map((f) => f.trim().toLowerCase()));
  // An empty label would match every node without a content description.
  const labels = new Set((rules.labels ?? []).filter((l) => l.trim() !== ""));

  // Short strings (most of an element tree) cannot hold a needle: skip the scan.
  const text = (s: string): string => (textMatcher === undefined || s.length < textMatcher.minLength ? s : scan(textMatcher, s, true).out);

  const header = (name: string, value: string): string => (isMaskedHeader(name) ? maskHeaderValue(name, value) : text(value));

  function headers(h: HeaderPairs): HeaderPairs;
  function headers(h: HeaderRecord): HeaderRecord;
  function headers(h: HeaderPairs | HeaderRecord): HeaderPairs | HeaderRecord {
    if (Array.isArray(h)) return h.map(([name, value]): [string, string] => [text(name), header(name, value)]);
    const out: HeaderRecord = {};
    for (const [name, value] of Object.entries(h)) {
      out[text(name)] = value === undefined ? undefined : Array.isArray(value) ? value.map((v) => header(name, v)) : header(name, value);
    }
    return out;
  }

  /** Deep copy with strings through text(); `keyed` decides per key whether the value is masked or treated as headers. */
  function copy(value: unknown, keyed: boolean, ancestors: Set<object>): unknown {
    if (typeof value === "string") return text(value);
    if (value === null || typeof value !== "object") return value;
    // Bytes (images) are copied, never masked.
    if (Buffer.isBuffer(value)) return Buffer.from(value);
    if (value instanceof Uint8Array) return value.slice();
    if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return value;
    if (value instanceof Date) return new Date(value.getTime());
    if (ancestors.has(value)) return "[circular]";
    ancestors.add(value);
    try {
      if (Array.isArray(value)) return value.map((v) => copy(v, keyed, ancestors));
      const out: Record<string, unknown> = {};
      // A UI element in a JSON document (a wait's diagnosis): its label masks its text, as in uiTree().
      if (keyed && labels.size > 0 && isUiNode(value) && value.text && labelled(value)) out["text"] = REDACTION_MASK;
      for (const [k, v] of Object.entries(value)) {
        const key = k.toLowerCase();
        if (k === "text" && out["text"] === REDACTION_MASK) continue;
        if (keyed && fields.has(key) && v !== null && v !== undefined) out[text(k)] = REDACTION_MASK;
        else if (keyed && key === "headers") out[text(k)] = headerish(v, ancestors);
        else out[text(k)] = copy(v, keyed, ancestors);
      }
      return out;
    } finally {
      ancestors.delete(value);
    }
  }

  /** `headers:` as an object, as [name, value] pairs, or as HAR's [{name, value}]. */
  function headerish(v: unknown, ancestors: Set<object>): unknown {
    if (Array.isArray(v)) {
      return v.map((e: unknown) => {
        if (Array.isArray(e) && e.length === 2 && typeof e[0] === "string" && typeof e[1] === "string") return [text(e[0]), header(e[0], e[1])];
        if (isRecord(e) && typeof e["name"] === "string" && typeof e["value"] === "string") {
          return { ...(copy(e, true, ancestors) as object), value: header(e["name"], e["value"]) };
        }
        return copy(e, true, ancestors);
      });
    }
    if (!isRecord(v)) return copy(v, true, ancestors);
    const out: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(v)) {
      if (typeof value === "string") out[text(name)] = header(name, value);
      else if (Array.isArray(value) && value.every((x) => typeof x === "string")) out[text(name)] = value.map((x: string) => header(name, x));
      else out[text(name)] = copy(value, true, ancestors);
    }
    return out;
  }

  const labelled = (n: UiNode): boolean => {
    if (labels.size === 0) return false;
    const id = n.resourceId ?? "";
    const at = id.indexOf(":id/");
    return labels.has(id) || (at >= 0 && labels.has(id.slice(at + 4))) || labels.has(n.text ?? "") || labels.has(n.contentDesc ?? "");
  };

  function node<T extends UiNode>(n: T): T {
    const out = copy({ ...n, children: [] }, false, new Set()) as T & { children: UiNode[] };
    // Empty text stays empty: masking it would claim a value that is not there.
    if (n.text && labelled(n)) out.text = REDACTION_MASK;
    // Fields name a node's string attributes (text, contentDesc, resourceId...); a bound or flag keeps its type.
    for (const [k, v] of Object.entries(n)) if (typeof v === "string" && v !== "" && fields.has(k.toLowerCase())) (out as unknown as Record<string, unknown>)[k] = REDACTION_MASK;
    // Generated messages keep their $typeName: copy() copies own fields, children are rebuilt here.
    out.children = (n.children ?? []).map(node);
    if (n.children === undefined) delete (out as Partial<UiNode>).children;
    return out;
  }

  function uiTree<T extends UiNode>(roots: readonly T[]): T[];
  function uiTree<T extends UiNode>(root: T): T;
  function uiTree<T extends UiNode>(roots: T | readonly T[]): T | T[] {
    return Array.isArray(roots) ? roots.map((r: T) => node(r)) : node(roots as T);
  }

  return {
    text,
    stream: () => redactionTransform(bytes()),
    incremental: () => incrementalRedactor(textMatcher),
    headers,
    json: (value) => copy(value, true, new Set()),
    uiTree,
  };
}

/** An object with a UI element's naming attributes (text and a resource id or content description). */
function isUiNode(v: object): v is UiNode {
  const r = v as Record<string, unknown>;
  return typeof r["text"] === "string" && (typeof r["resourceId"] === "string" || typeof r["contentDesc"] === "string");
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
