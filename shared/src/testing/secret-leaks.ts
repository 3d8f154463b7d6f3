import { jsonForms, secretForms } from "../redaction/secret-forms.js";

/** A prefix this long of any form is taken as a leak: shorter ones occur by chance. */
export const MIN_LEAK_PREFIX = 8;

/**
 * The byte strings that would give a secret away: every form the redactor
 * masks (literal, percent-, HTML-, JSON-escaped), JSON-escaped twice (a
 * JSON string stored inside JSON), base64 at each of its three alignments
 * inside a longer run, and every prefix of 8 or more characters of the
 * literal and JSON-escaped forms (what a cut before masking leaves).
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
  return [...out].map(([s, form]) => ({ form, needle: Buffer.from(s, "utf8") }));
}

/** Which forms of the secret `haystack` holds (empty: none). */
export function secretLeaks(haystack: string | Buffer, secret: string): string[] {
  const hay = typeof haystack === "string" ? Buffer.from(haystack, "utf8") : haystack;
  return leakNeedles(secret)
    .filter((n) => hay.includes(n.needle))
    .map((n) => n.form);
}
