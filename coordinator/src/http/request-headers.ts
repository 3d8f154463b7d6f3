import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";

/** A Node request's headers as fetch Headers (what the auth helpers read). */
export function headersOf(req: IncomingMessage | Http2ServerRequest): Headers {
  const h = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (k.startsWith(":") || v === undefined) continue;
    h.set(k, Array.isArray(v) ? v.join(", ") : v);
  }
  // HTTP/2 carries the host as :authority.
  const authority = req.headers[":authority"];
  if (!h.has("host") && typeof authority === "string") h.set("host", authority);
  return h;
}
