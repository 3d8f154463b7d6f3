import { REDACTION_MASK } from "./matcher.js";

/** Masked unless named in `unmaskHeaders`. */
export const DEFAULT_SENSITIVE_HEADERS: readonly string[] = ["authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "x-auth-token"];

// Authorization values keep their scheme ("Bearer [redacted]"): it says how the call authenticated, not with what.
const SCHEME_HEADERS = new Set(["authorization", "proxy-authorization"]);
const SCHEME = /^([A-Za-z][A-Za-z0-9._~+-]*) +\S/;

/** Cookie and Set-Cookie carry the same session values: naming either names both. */
function group(name: string): string {
  const n = name.trim().toLowerCase();
  return n === "set-cookie" ? "cookie" : n;
}

/**
 * Which header names are masked: the defaults minus `unmask`, plus
 * `extra`. A name both added and unmasked stays masked: the explicit mask
 * wins, failing closed.
 */
export function headerMasker(extra: readonly string[], unmask: readonly string[]): (name: string) => boolean {
  const unmasked = new Set(unmask.map(group));
  const masked = new Set(DEFAULT_SENSITIVE_HEADERS.map(group).filter((g) => !unmasked.has(g)));
  for (const name of extra) masked.add(group(name));
  return (name) => masked.has(group(name));
}

export function maskHeaderValue(name: string, value: string): string {
  if (value === "") return value;
  const scheme = SCHEME_HEADERS.has(name.trim().toLowerCase()) ? SCHEME.exec(value) : null;
  return scheme ? `${scheme[1]} ${REDACTION_MASK}` : REDACTION_MASK;
}
