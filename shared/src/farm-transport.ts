import { readFileSync } from "node:fs";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { invalidArgument } from "./errors.js";
import { wideWindowSessions } from "./http2-windows.js";
import { noDelaySessionOptions } from "./no-delay.js";
import { checkTokenTransport } from "./transport-security.js";

export interface FarmTransportOptions {
  url: string;
  token: string;
  /** PEM bundle to verify the coordinator with instead of the system roots. */
  caFile?: string | undefined;
  /** Allow a token over cleartext to a non-loopback address. */
  insecure?: boolean | undefined;
  /** Extra headers on every call (x-farm-lease). */
  headers?: Record<string, string>;
  interceptors?: Interceptor[];
  /** HTTP/2 pings, for long-lived streams that must notice a dead peer. */
  pingIntervalMs?: number;
  /**
   * Wire protocol over HTTP/2 (the coordinator serves both): "grpc" by
   * default. "connect" costs connect-node less per unary call
   * (test/bench/rpc-floor.ts), but an evidence capture against a hung phone
   * once stalled with it under load (docs/performance.md): not the default
   * until that is understood.
   */
  protocol?: "connect" | "grpc";
}

/**
 * The one way clients (CLI, agent) reach a coordinator: gRPC over HTTP/2,
 * the bearer token on every call, TLS verified against the system roots or
 * --ca-file, and no token over cleartext except to loopback or --insecure.
 */
export function farmTransport(opts: FarmTransportOptions): Transport {
  checkTokenTransport(opts.url, opts.insecure === true);
  let ca: Buffer | undefined;
  if (opts.caFile) {
    try {
      ca = readFileSync(opts.caFile);
    } catch (err) {
      throw invalidArgument("ca-file", `cannot read the CA file ${opts.caFile}: ${(err as Error).message}`);
    }
  }
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${opts.token}`);
    for (const [k, v] of Object.entries(opts.headers ?? {})) req.header.set(k, v);
    return next(req);
  };
  const options = {
    baseUrl: opts.url,
    interceptors: [auth, ...(opts.interceptors ?? [])],
    sessionManager: wideWindowSessions(
      opts.url,
      opts.pingIntervalMs ? { pingIntervalMs: opts.pingIntervalMs, pingTimeoutMs: opts.pingIntervalMs } : {},
      noDelaySessionOptions(ca ? { ca } : {}),
    ),
  };
  return opts.protocol === "connect" ? createConnectTransport({ ...options, httpVersion: "2" }) : createGrpcTransport(options);
}
