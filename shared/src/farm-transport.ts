import { readFileSync } from "node:fs";
import { Code, ConnectError, createContextKey, createContextValues, type ContextValues, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, type Http2SessionManager } from "@connectrpc/connect-node";
import type { DescMethod } from "@bufbuild/protobuf";
import { DEADLINE_GRACE_MS } from "./deadline.js";
import { Errors, farmError, invalidArgument } from "./errors.js";
import { grpcStream } from "./grpc-stream/grpc-stream-transport.js";
import { grpcUnary } from "./grpc-unary/grpc-unary-transport.js";
import { ErrorDetailSchema } from "./gen/farm/v1/error_pb.js";
import { rulesOf } from "./method-rules.js";
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
  /** This transport's per-stream receive window (http2-windows.ts); its own connection, since the window is per connection. */
  streamWindowBytes?: number;
  /**
   * Unary calls over gRPC: "hand-framed" (grpc-unary/, on the same kept
   * session as the streams) by default, "connect" for connect-node's own
   * gRPC transport.
   */
  unary?: "hand-framed" | "connect";
  /**
   * Streaming calls over gRPC: "hand-framed" (grpc-stream/) by default,
   * "connect" for connect-node's; FARM_GRPC_STREAMS=connect in the
   * environment sets the default (for measuring one against the other).
   */
  streams?: "hand-framed" | "connect";
  /** Told the transport's session manager, so whoever made the transport can close its connection (the CLI run in process). */
  track?: (manager: Http2SessionManager) => void;
}

/**
 * The one way clients (CLI, agent) reach a coordinator: gRPC over HTTP/2,
 * the bearer token on every call, TLS verified against the system roots or
 * --ca-file, and no token over cleartext except to loopback or --insecure.
 * A call's timeout is sent as given and waited for DEADLINE_GRACE_MS longer
 * (withDeadlineGrace).
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
  const sessionManager = wideWindowSessions(
    opts.url,
    opts.pingIntervalMs ? { pingIntervalMs: opts.pingIntervalMs, pingTimeoutMs: opts.pingIntervalMs } : {},
    noDelaySessionOptions(ca ? { ca } : {}),
    opts.streamWindowBytes,
  );
  opts.track?.(sessionManager);
  const options = { baseUrl: opts.url, interceptors: [auth, ...(opts.interceptors ?? []), sendCallerTimeout], sessionManager };
  if (opts.protocol === "connect") return withDeadlineGrace(createConnectTransport({ ...options, httpVersion: "2" }));
  const grpc = createGrpcTransport(options);
  const handFramedStreams = (opts.streams ?? (process.env["FARM_GRPC_STREAMS"] === "connect" ? "connect" : "hand-framed")) === "hand-framed";
  const stream = handFramedStreams ? grpcStream({ baseUrl: opts.url, sessions: sessionManager, interceptors: options.interceptors }) : grpc.stream.bind(grpc);
  const unary = opts.unary === "connect" ? grpc.unary.bind(grpc) : grpcUnary({ baseUrl: opts.url, sessions: sessionManager, interceptors: options.interceptors });
  return withDeadlineGrace({ unary, stream });
}

/** The timeout the caller gave a call (ms), sent on the wire while the transport waits longer. */
const SENT_TIMEOUT_MS = createContextKey<number | undefined>(undefined, { description: "farm: the caller's timeout" });

/** Puts the caller's own timeout on the wire in place of the longer local wait. */
const sendCallerTimeout: Interceptor = (next) => (req) => {
  const sent = req.contextValues.get(SENT_TIMEOUT_MS);
  if (sent !== undefined) {
    if (req.header.has("grpc-timeout")) req.header.set("grpc-timeout", `${sent}m`);
    if (req.header.has("connect-timeout-ms")) req.header.set("connect-timeout-ms", String(sent));
  }
  return next(req);
};

/**
 * A call with timeout T tells the server T but gives up locally only at
 * T + graceMs: the server's answer at its deadline (an action id, whether
 * the action was dispatched) is heard even on a loaded host. A local
 * give-up is DEADLINE_EXCEEDED; for a method that changes something the
 * outcome is unknown, and for a device change the error says where the
 * agent's journal shows it.
 */
function withDeadlineGrace(transport: Transport, graceMs = DEADLINE_GRACE_MS): Transport {
  const extend = (timeoutMs: number | undefined, contextValues: ContextValues | undefined): [number | undefined, ContextValues | undefined] => {
    if (timeoutMs === undefined || timeoutMs <= 0) return [timeoutMs, contextValues];
    const values = contextValues ?? createContextValues();
    values.set(SENT_TIMEOUT_MS, Math.max(1, Math.ceil(timeoutMs)));
    return [timeoutMs + graceMs, values];
  };
  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const [wait, values] = extend(timeoutMs, contextValues);
      try {
        return await transport.unary(method, signal, wait, header, input, values);
      } catch (err) {
        throw gaveUp(err, method, input, timeoutMs, graceMs);
      }
    },
    async stream(method, signal, timeoutMs, header, input, contextValues) {
      const [wait, values] = extend(timeoutMs, contextValues);
      try {
        return await transport.stream(method, signal, wait, header, input, values);
      } catch (err) {
        throw gaveUp(err, method, undefined, timeoutMs, graceMs);
      }
    },
  };
}

/** This client's own give-up (Connect's bare deadline error) as a farm error; any other error as it is. */
export function gaveUp(err: unknown, method: DescMethod, input: unknown, timeoutMs: number | undefined, graceMs: number): unknown {
  const ce = ConnectError.from(err);
  if (ce.code !== Code.DeadlineExceeded || ce.findDetails(ErrorDetailSchema).length > 0 || timeoutMs === undefined) return err;
  const rules = rulesOf(method);
  const serial = (input as { target?: { serial?: unknown } } | undefined)?.target?.serial;
  const next = rules.deviceChange
    ? `; the outcome is unknown: if the call reached the agent, \`farm device ownership status --device ${typeof serial === "string" && serial ? serial : "<serial>"}\` shows its action`
    : rules.readOnly
    ? ""
    : "; the outcome is unknown";
  return farmError(
    Errors.DEADLINE_EXCEEDED,
    `no answer from the coordinator within the ${timeoutMs} ms timeout and ${graceMs} ms more${next}`,
    "timeout",
    rules.readOnly ? undefined : { dispatched: null, ambiguous: true },
  );
}
