import { isIP } from "node:net";
import { Errors, farmError } from "./errors.js";

/**
 * Loopback, for the token rule: exactly 127.0.0.1, ::1 and localhost. Other
 * 127/8 addresses count as remote on purpose: they are how a test (or an
 * operator) stands in for another machine on one host.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "127.0.0.1" || h === "::1" || h === "::ffff:127.0.0.1";
}

export function isLoopbackAddress(address: string | undefined): boolean {
  return address !== undefined && isLoopbackHost(address);
}

/**
 * Refuses to send a token over cleartext to anything but loopback unless
 * the operator said --insecure. Checked before any connection is made.
 */
export function checkTokenTransport(url: string, insecure: boolean, field = "coordinator"): void {
  const u = new URL(url);
  if (u.protocol === "https:" || insecure || isLoopbackHost(u.hostname)) return;
  throw farmError(
    Errors.INSECURE_TRANSPORT,
    `refusing to send a token in cleartext to ${u.host}: use https:// (the coordinator's --tls-cert/--tls-key), or pass --insecure if this network is trusted`,
    field,
  );
}

/** TLS servername: a DNS name only (RFC 6066 forbids IP addresses there). */
export function serverName(host: string): string | undefined {
  const h = host.replace(/^\[|\]$/g, "");
  return isIP(h) ? undefined : h;
}
