import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http2";

/** Node's header object as fetch Headers, without pseudo-headers; repeated fields joined as HTTP joins them. */
export function toHeaders(node: IncomingHttpHeaders): Headers {
  const h = new Headers();
  for (const key in node) {
    if (key.charCodeAt(0) === 58 /* ":" */) continue;
    const v = node[key];
    if (v === undefined) continue;
    if (Array.isArray(v)) { for (const x of v) h.append(key, x); }
    else h.append(key, v);
  }
  return h;
}

/** Fetch Headers as Node's outgoing headers (set-cookie stays a list). */
export function toNodeHeaders(h: Headers): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  h.forEach((value, key) => (out[key] = value));
  const cookies = h.getSetCookie();
  if (cookies.length > 0) out["set-cookie"] = cookies;
  return out;
}
