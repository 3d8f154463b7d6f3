/**
 * The spellings a secret's literal value takes on its way into logs, element
 * trees and request text: the literal, percent-encoded (as a URL component,
 * a form body, a whole URL; upper- or lower-case hex), HTML-escaped (with
 * the quote spellings of the common escapers) and JSON-escaped (as
 * JSON.stringify writes it, with `\/`, and ASCII-only with either hex
 * case; and JSON.stringify's escaped twice). De-duplicated; most secrets
 * (letters, digits, `-_.`) have one form.
 */
export function secretForms(secret: string): string[] {
  const forms = new Set<string>([secret]);
  for (const f of percentForms(secret)) forms.add(f);
  for (const f of htmlForms(secret)) forms.add(f);
  for (const f of jsonForms(secret)) forms.add(f);
  // Escaped twice: a JSON string quoted again (an error message quoting a JSON argument, JSON kept inside JSON).
  forms.add(JSON.stringify(JSON.stringify(secret).slice(1, -1)).slice(1, -1));
  return [...forms];
}

export function percentForms(s: string): string[] {
  const out: string[] = [];
  // encodeURI* throw on a lone surrogate: such a secret only has its literal form here.
  const attempt = (encode: () => string) => {
    try {
      const f = encode();
      out.push(f, f.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase()));
    } catch {
      /* not encodable */
    }
  };
  attempt(() => encodeURIComponent(s));
  attempt(() => encodeURIComponent(s).replace(/%20/g, "+"));
  // application/x-www-form-urlencoded also escapes !'()~.
  attempt(() => new URLSearchParams({ v: s }).toString().slice(2));
  attempt(() => encodeURI(s));
  return out;
}

export function htmlForms(s: string): string[] {
  const base = s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  // Python's html.escape writes &quot; &#x27;, Go's &#34; &#39;; text content often leaves quotes alone.
  const out: string[] = [];
  for (const dq of ["\"", "&quot;", "&#34;"]) {
    for (const sq of ["'", "&#39;", "&#x27;"]) out.push(base.replace(/"/g, dq).replace(/'/g, sq));
  }
  return out;
}

export function jsonForms(s: string): string[] {
  const native = JSON.stringify(s).slice(1, -1);
  // Python's json.dumps (ensure_ascii) and Java encoders write non-ASCII as \uXXXX, some in upper case.
  const ascii = native.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  const upper = ascii.replace(/\\u([0-9a-f]{4})/g, (_m, h: string) => `\\u${h.toUpperCase()}`);
  const out: string[] = [];
  for (const f of [native, ascii, upper]) out.push(f, f.replace(/\//g, "\\/"));
  return out;
}
