import { connect } from "node:net";
import { connect as tlsConnect } from "node:tls";
import type { ClientSessionOptions } from "node:http2";
import { serverName } from "./transport-security.js";

/**
 * HTTP/2 client sessions with Nagle's algorithm off. Control messages and
 * small RPCs are latency-bound; with Nagle on, a small write waits for the
 * peer's delayed ACK, which adds milliseconds to every routed call.
 */
export function noDelaySessionOptions(tls: { ca?: Buffer } = {}): ClientSessionOptions {
  return {
    createConnection: (authority: URL) => {
      const port = Number(authority.port) || (authority.protocol === "https:" ? 443 : 80);
      const host = authority.hostname.replace(/^\[|\]$/g, "");
      return authority.protocol === "https:"
        ? tlsConnect({ host, port, ALPNProtocols: ["h2"], ...(serverName(host) ? { servername: serverName(host) } : {}), ...(tls.ca ? { ca: tls.ca } : {}) }).setNoDelay(true)
        : connect({ host, port, noDelay: true });
    },
  };
}
