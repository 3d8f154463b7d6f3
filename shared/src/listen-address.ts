import { invalidArgument } from "./errors.js";

export interface ListenAddress {
  host: string;
  port: number;
}

/** Parses HOST:PORT (IPv6 as [::1]:PORT); port 0 asks the OS for a free one. */
export function parseListenAddress(value: string, field = "listen"): ListenAddress {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(value.trim());
  if (!m) throw invalidArgument(field, `expected HOST:PORT, got "${value}"`);
  const host = (m[1] ?? m[2]) as string;
  const port = Number(m[3]);
  if (port > 65535) throw invalidArgument(field, `port ${port} is out of range 0..65535`);
  return { host, port };
}

/** True for addresses that never leave this machine. */
export function isLocalOnlyHost(host: string): boolean {
  return host === "localhost" || host === "::1" || host.startsWith("127.");
}
