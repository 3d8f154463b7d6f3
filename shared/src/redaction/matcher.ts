/**
 * One compiled matcher for a set of needles (a secret's forms) plus the
 * `Basic <base64>` credential check, and the scan that masks them.
 *
 * The needles become a single RegExp alternation, longest first. A trie-
 * shaped pattern measured no faster: irregexp already skips ahead on the
 * needles' leading characters, so a flat alternation it is.
 * Overlapping matches (secret A's tail is secret B's head) are masked as
 * their union, so no fragment of either survives.
 */

export const REDACTION_MASK = "[redacted]";

// "Basic" in any case, 1..8 blanks, a base64 (or base64url) token. Bounded
// blanks keep the look-ahead a stream needs finite.
const BASIC = "([Bb][Aa][Ss][Ii][Cc][ \\t]{1,8})([A-Za-z0-9+/_-]+={0,2})";
const BASIC_PREFIX_MAX = 5 + 8 + 1;
/** A token this long still running at a chunk's end is judged on what is visible. */
export const BASIC_TOKEN_CAP = 16 * 1024;

export interface Matcher {
  /** All needles and the Basic branch, global. */
  readonly any: RegExp;
  /** Needles only, sticky: extends a match over overlapping needles. */
  readonly sticky: RegExp;
  /** Needles only: does a decoded credential hold a secret? */
  readonly contains: RegExp;
  /** Shortest needle: a shorter decoded credential cannot hold one. */
  readonly minLength: number;
  /** Characters a stream must hold back so no match is decided early. */
  readonly horizon: number;
  /** Base64 token -> the credential, in the same representation as the needles. */
  readonly decode: (token: string) => string;
}

export function compileMatcher(needles: readonly string[], decode: (token: string) => string): Matcher | undefined {
  if (needles.length === 0) return undefined;
  const source = alternationSource(needles);
  const maxLen = Math.max(...needles.map((n) => n.length));
  return {
    // Needles first: at one position a literal match beats the Basic branch.
    any: new RegExp(`${source}|${BASIC}`, "g"),
    sticky: new RegExp(source, "y"),
    contains: new RegExp(source),
    minLength: Math.min(...needles.map((n) => n.length)),
    horizon: Math.max(maxLen, BASIC_PREFIX_MAX),
    decode,
  };
}

/**
 * Masks every match in `s`. With `final` false (a stream's buffer) only
 * matches whose outcome cannot change with more input are applied, and the
 * scan stops at `rest`: the caller emits `out`, keeps `s.slice(rest)` and
 * prepends it to the next chunk. The result over any split of the input
 * equals one final scan of the whole.
 */
export function scan(m: Matcher, s: string, final: boolean): { out: string; rest: number } {
  const re = m.any;
  // Positions below `decided` see every needle that could start there in full.
  const decided = final ? s.length : s.length - m.horizon + 1;
  let out = "";
  let copied = 0;
  let deferredAt = -1;
  re.lastIndex = 0;
  for (let match = re.exec(s); match !== null; match = re.exec(s)) {
    const at = match.index;
    if (at >= decided) break;
    const end = at + match[0].length;
    const prefix = match[1];
    if (prefix !== undefined) {
      const token = match[2] ?? "";
      if (!final && end === s.length && token.length < BASIC_TOKEN_CAP) {
        deferredAt = at; // the token may go on in the next chunk
        break;
      }
      // Base64 carries 3 bytes per 4 characters; "Basic auth" and the like are dismissed without decoding.
      if (Math.floor((token.length * 3) / 4) < m.minLength || !m.contains.test(m.decode(token))) {
        re.lastIndex = at + 1; // not ours: needles inside the token are still looked for
        continue;
      }
    }
    const maskEnd = extendOverOverlaps(m, s, at, end, decided);
    if (maskEnd < 0) {
      deferredAt = at;
      break;
    }
    // "Basic " stays readable unless a needle starts inside it (a secret like "asic x").
    const kept = prefix !== undefined && !needleStartsIn(m, s, at + 1, at + prefix.length) ? prefix : "";
    out += s.slice(copied, at) + kept + REDACTION_MASK;
    copied = maskEnd;
    re.lastIndex = maskEnd;
  }
  const rest = final ? s.length : deferredAt >= 0 ? deferredAt : Math.max(0, decided, copied);
  if (rest > copied) out += s.slice(copied, rest);
  return { out, rest: Math.max(rest, copied) };
}

/** Does a needle start at a position in [from, to)? */
function needleStartsIn(m: Matcher, s: string, from: number, to: number): boolean {
  for (let p = from; p < to; p++) {
    m.sticky.lastIndex = p;
    if (m.sticky.test(s)) return true;
  }
  return false;
}

/** End of the union of needle matches overlapping [start, end); -1 when a position is not yet decided. */
function extendOverOverlaps(m: Matcher, s: string, start: number, end: number, decided: number): number {
  for (let p = start + 1; p < end; p++) {
    if (p >= decided) return -1;
    m.sticky.lastIndex = p;
    const hit = m.sticky.exec(s);
    if (hit !== null && p + hit[0].length > end) end = p + hit[0].length;
  }
  return end;
}

/** Longest first, so at one position the longest needle wins. */
function alternationSource(needles: readonly string[]): string {
  return [...needles]
    .sort((a, b) => b.length - a.length || (a < b ? -1 : 1))
    .map((n) => Array.from({ length: n.length }, (_, i) => escapeChar(n[i] as string)).join(""))
    .join("|");
}

function escapeChar(c: string): string {
  const code = c.charCodeAt(0);
  if (/[\\^$.*+?()[\]{}|/-]/.test(c)) return `\\${c}`;
  // Controls, non-ASCII and lone surrogates spelled as \uXXXX keep the source printable and unambiguous.
  if (code < 0x20 || code > 0x7e) return `\\u${code.toString(16).padStart(4, "0")}`;
  return c;
}
