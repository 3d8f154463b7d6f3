/**
 * Capture tokens: `kind[.when]`, what a session keeps of a step beyond its
 * baseline screenshots. Instant kinds are taken at a moment (before and/or
 * after the action); interval kinds run from before the action until the
 * step has settled, so they only come `around`.
 */

export const INSTANT_KINDS = ["screenshot", "elements"] as const;
export const INTERVAL_KINDS = ["video", "deviceLog"] as const;
/** Accepted for symmetry with the vocabulary: every step record already is the action log. */
export const INHERENT_KINDS = ["actionLog"] as const;

export type InstantKind = (typeof INSTANT_KINDS)[number];
export type IntervalKind = (typeof INTERVAL_KINDS)[number];
export type CaptureKind = InstantKind | IntervalKind;
export type CaptureWhen = "before" | "after" | "around";

/** Every spelling the policy accepts, in the order the schema lists them. */
export const CAPTURE_TOKENS: readonly string[] = [
  ...INSTANT_KINDS.flatMap((k) => [k, `${k}.before`, `${k}.after`, `${k}.around`]),
  ...INTERVAL_KINDS.flatMap((k) => [k, `${k}.around`]),
  ...INHERENT_KINDS,
];

/** How the allowed forms read in an error. */
export const ALLOWED_FORMS = "screenshot[.before|.after|.around], elements[.before|.after|.around] (default .after), video[.around], deviceLog[.around] (default .around), actionLog";

/** A token with its default applied; `actionLog` is null (nothing to capture). */
export interface CaptureToken {
  kind: CaptureKind;
  when: CaptureWhen;
  /** The canonical spelling: "elements.after", "deviceLog.around". */
  token: string;
}

export class CaptureTokenError extends Error {
  constructor(readonly tokenText: string, message: string) {
    super(message);
    this.name = "CaptureTokenError";
  }
}

export const isInstant = (k: string): k is InstantKind => (INSTANT_KINDS as readonly string[]).includes(k);
/** Interval kinds must be running before the action starts. */
export const isInterval = (k: string): k is IntervalKind => (INTERVAL_KINDS as readonly string[]).includes(k);

/** Why `text` is not a token, or null when it is one. */
export function captureTokenProblem(text: unknown): string | null {
  if (typeof text !== "string") return `a capture token must be a string (allowed: ${ALLOWED_FORMS})`;
  const [kind = "", when, extra] = text.split(".");
  const bad = (why: string) => `${JSON.stringify(text)} is not a capture token: ${why} (allowed: ${ALLOWED_FORMS})`;
  if (extra !== undefined) return bad("one modifier at most");
  if ((INHERENT_KINDS as readonly string[]).includes(kind)) return when === undefined ? null : bad(`${kind} takes no modifier`);
  if (isInstant(kind)) return when === undefined || when === "before" || when === "after" || when === "around" ? null : bad(`${kind} is taken before, after or around the action`);
  if (isInterval(kind)) return when === undefined || when === "around" ? null : bad(`${kind} runs around the action (started before it, stopped once the step settles)`);
  const hint = [...INSTANT_KINDS, ...INTERVAL_KINDS, ...INHERENT_KINDS].find((k) => k.toLowerCase() === kind.toLowerCase());
  return bad(hint ? `unknown kind "${kind}" (did you mean ${hint}?)` : `unknown kind "${kind}"`);
}

/** Parses one token with its default applied; null for actionLog. Throws CaptureTokenError. */
export function parseCaptureToken(text: string): CaptureToken | null {
  const problem = captureTokenProblem(text);
  if (problem) throw new CaptureTokenError(text, problem);
  const [kind, given] = text.split(".") as [string, CaptureWhen | undefined];
  if (!isInstant(kind) && !isInterval(kind)) return null;
  const when: CaptureWhen = given ?? (isInstant(kind) ? "after" : "around");
  return { kind, when, token: `${kind}.${when}` };
}

/**
 * The capture points of a list of tokens: an instant kind `around` is two
 * points (before and after); actionLog is none. Order kept, duplicates
 * dropped.
 */
export function capturePoints(tokens: readonly string[]): CaptureToken[] {
  const out = new Map<string, CaptureToken>();
  for (const text of tokens) {
    const t = parseCaptureToken(text);
    if (!t) continue;
    const points: CaptureToken[] = isInstant(t.kind) && t.when === "around"
      ? [
        { kind: t.kind, when: "before", token: `${t.kind}.before` },
        { kind: t.kind, when: "after", token: `${t.kind}.after` },
      ]
      : [t];
    for (const p of points) if (!out.has(p.token)) out.set(p.token, p);
  }
  return [...out.values()];
}

/** Heavy kinds are only captured when asked for; explain warns about broad use. */
export function isHeavy(kind: CaptureKind): boolean {
  return isInterval(kind);
}
