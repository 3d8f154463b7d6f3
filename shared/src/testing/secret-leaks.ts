import { jsonForms, secretForms } from "../redaction/secret-forms.js";

/** A prefix this long of any form is taken as a leak: shorter ones occur by chance. */
export const MIN_LEAK_PREFIX = 8;

/**
 * The byte strings that would give a secret away: every form the redactor
 * masks (literal, percent-, HTML-, JSON-escaped), JSON-escaped twice (a
 * JSON string stored inside JSON), base64 at each of its three alignments
 * inside a longer run, every prefix of 8 or more characters of the
 * literal and JSON-escaped forms (what a cut before masking leaves), and
 * every 8 characters in a row that no escaping changes (escaped any number
 * of times, cut anywhere).
 */
export function leakNeedles(secret: string): { form: string; needle: Buffer }[] {
  const out = new Map<string, string>();
  const add = (form: string, s: string) => {
    if (s.length >= MIN_LEAK_PREFIX && !out.has(s)) out.set(s, form);
  };
  const forms = secretForms(secret);
  forms.forEach((f, i) => add(`form#${i}`, f));
  for (const f of jsonForms(secret)) for (const g of jsonForms(f)) add("json-twice", g);
  const bytes = Buffer.from(secret, "utf8");
  for (let k = 0; k < 3; k++) {
    const b64 = Buffer.concat([Buffer.alloc(k, 0x20), bytes]).toString("base64");
    // Characters made only of the secret's bits: after the pad's, before the tail's.
    add(`base64@${k}`, b64.slice(k === 0 ? 0 : k + 1, -3));
  }
  for (const f of [secret, ...jsonForms(secret)]) {
    for (let n = MIN_LEAK_PREFIX; n < f.length; n++) add(`prefix(${n})`, f.slice(0, n));
  }
  // Characters no encoding changes: 8 of them in a row read the same however often the text was escaped or cut.
  for (const run of secret.match(/[A-Za-z0-9._~-]{8,}/g) ?? []) {
    for (let i = 0; i + MIN_LEAK_PREFIX <= run.length; i++) add(`run@${i}`, run.slice(i, i + MIN_LEAK_PREFIX));
  }
  return [...out].map(([s, form]) => ({ form, needle: Buffer.from(s, "utf8") }));
}

/**
 * Which forms of the secret `haystack` holds (empty: none). Bytes and
 * strings are searched as they are; any other value string by string (its
 * keys too, so an escaped form inside a string is not hidden by the
 * escaping a JSON dump would add) and as JSON.
 */
export function secretLeaks(haystack: unknown, secret: string): string[] {
  const needles = leakNeedles(secret);
  const found = new Set<string>();
  const search = (hay: Buffer) => {
    for (const n of needles) if (hay.includes(n.needle)) found.add(n.form);
  };
  if (Buffer.isBuffer(haystack)) search(haystack);
  else if (typeof haystack === "string") search(Buffer.from(haystack, "utf8"));
  else {
    for (const s of stringsOf(haystack)) search(Buffer.from(s, "utf8"));
    search(Buffer.from(JSON.stringify(haystack, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v)) ?? "", "utf8"));
  }
  return [...found];
}

function stringsOf(v: unknown, out: string[] = []): string[] {
  if (typeof v === "string") out.push(v);
  else if (v instanceof Uint8Array) out.push(Buffer.from(v).toString("utf8"));
  else if (Array.isArray(v)) { for (const x of v) stringsOf(x, out); }
  else if (v !== null && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) {
      out.push(k);
      stringsOf(x, out);
    }
  }
  return out;
}
