import { invalidArgument } from "../errors.js";

/**
 * What to mask; the shape of the wire's `Redaction` message, so a decoded
 * message can be passed as is. Policy and site config are merged with
 * {@link mergeRedactionRules}.
 */
export interface RedactionRules {
  /** Literal secret values. */
  secrets: readonly string[];
  /** Element labels (resource id, text, content description) whose node text is masked. */
  labels?: readonly string[];
  /** JSON field names (any case) whose values are masked. */
  fields?: readonly string[];
  /** Header names masked in addition to the defaults. */
  headers?: readonly string[];
  /** Default header names not to mask. */
  unmaskHeaders?: readonly string[];
}

/** Shorter secrets would mask ordinary words, digits and punctuation everywhere. */
export const MIN_SECRET_LENGTH = 4;

/** Union of two rule sets, each list de-duplicated in first-seen order (names of fields and headers in any case). */
export function mergeRedactionRules(a: Partial<RedactionRules>, b: Partial<RedactionRules>): Required<RedactionRules> {
  return {
    secrets: union(a.secrets, b.secrets, (s) => s),
    labels: union(a.labels, b.labels, (s) => s),
    fields: union(a.fields, b.fields, lower),
    headers: union(a.headers, b.headers, lower),
    unmaskHeaders: union(a.unmaskHeaders, b.unmaskHeaders, lower),
  };
}

/**
 * Refuses secrets that would mask ordinary text: fewer than
 * MIN_SECRET_LENGTH characters (code points), or only whitespace. The
 * error names the secret's position, never its value.
 */
export function checkSecrets(secrets: readonly string[]): string[] {
  secrets.forEach((s, i) => {
    const length = [...s].length;
    if (length < MIN_SECRET_LENGTH) {
      throw invalidArgument("redaction.secrets", `secret #${i + 1} has ${length} characters; secrets need at least ${MIN_SECRET_LENGTH}, shorter ones would mask ordinary text`);
    }
    if (s.trim() === "") throw invalidArgument("redaction.secrets", `secret #${i + 1} is only whitespace`);
  });
  return [...new Set(secrets)];
}

function union(a: readonly string[] | undefined, b: readonly string[] | undefined, key: (s: string) => string): string[] {
  const seen = new Map<string, string>();
  for (const s of [...(a ?? []), ...(b ?? [])]) if (!seen.has(key(s))) seen.set(key(s), s);
  return [...seen.values()];
}

function lower(s: string): string {
  return s.trim().toLowerCase();
}
