import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { clientSession, type ClientSession, type SessionInput } from "../session.js";
import { frame, type OneCallRequest } from "./one-call.js";
import type { RecordedCall } from "./recorded-call.js";

/** What grpc-unary-transport.ts accepts in one answer (UNARY_RESPONSE_MAX_BYTES). */
const ANSWER_MAX_BYTES = 64 * 1024 * 1024;
/** How much longer than its timeout a call is waited for (shared/src/deadline.ts DEADLINE_GRACE_MS). */
const DEADLINE_GRACE_MS = 2_000;
/** What connect's gRPC client says it is: the coordinator sees the same caller either way. */
const USER_AGENT = "connect-es/2.1.1";

/** FARM_ONE_CALL=0: the hot commands take their full path (Connect, protobuf-es) even when one request would do; for comparing the two (test/deploy/install-cli.test.ts). */
export function oneCallOff(env: NodeJS.ProcessEnv): boolean {
  return env["FARM_ONE_CALL"] === "0";
}

export interface CallPlan {
  session: ClientSession;
  /** The x-request-id sent (what --verbose prints). */
  requestId: string;
  request: OneCallRequest;
}

/**
 * The request the usual transport (shared/src/farm-transport.ts, with the
 * CLI's interceptors) would send for one unary call: the same headers
 * (token, x-request-id, the call's scope headers, grpc-timeout as the
 * caller's timeout, waited DEADLINE_GRACE_MS longer). Undefined wherever
 * that transport would first refuse or do something else (no token, an
 * address it would not send a token to, a CA file it cannot read, a run
 * already stopped): the command then takes its full path, which says so.
 * `recorded`: the call lib/one.cjs already made (recorded-call.ts), planned
 * again only to be judged: its x-request-id is kept.
 */
export function planCall(
  input: SessionInput & { ctx: { stopSignal?: AbortSignal | undefined } },
  path: string,
  message: Uint8Array,
  scope: Record<string, string>,
  recorded?: RecordedCall,
): CallPlan | undefined {
  let session: ClientSession;
  try {
    session = clientSession(input);
  } catch {
    return undefined;
  }
  const config = session.config;
  if (!config.token) return undefined;
  const origin = plainOrigin(config.coordinator, config.insecure);
  if (!origin) return undefined;
  let ca: Buffer | undefined;
  if (config.caFile) {
    try {
      ca = readFileSync(config.caFile);
    } catch {
      return undefined;
    }
  }
  const stop = input.ctx.stopSignal;
  // A call the plain runner already made was planned before any stop: it is judged, not sent again.
  if (stop?.aborted && !recorded) return undefined;
  const requestId = recorded?.requestId ?? randomUUID();
  const timeoutMs = session.timeoutMs;
  const headers: Record<string, string> = {
    "content-type": "application/grpc+proto",
    "user-agent": USER_AGENT,
    ...(timeoutMs > 0 ? { "grpc-timeout": `${Math.max(1, Math.ceil(timeoutMs))}m` } : {}),
    te: "trailers",
    "grpc-accept-encoding": "gzip",
    "x-request-id": requestId,
    authorization: `Bearer ${config.token}`,
    ...scope,
  };
  return {
    session,
    requestId,
    request: { origin, path, headers, body: frame(message), waitMs: timeoutMs > 0 ? timeoutMs + DEADLINE_GRACE_MS : undefined, stop, ca, maxBytes: ANSWER_MAX_BYTES + 5 },
  };
}

/**
 * The coordinator's origin when the usual transport would call it as is: an
 * http(s) URL with no path, and a token over cleartext only to loopback or
 * with --insecure (shared/src/transport-security.ts). Anything else is the
 * full path's to refuse or to handle.
 */
export function plainOrigin(url: string, insecure: boolean): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return undefined;
  if ((u.pathname !== "/" && u.pathname !== "") || u.search !== "" || u.hash !== "" || u.username !== "" || u.password !== "") return undefined;
  const host = u.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  const loopback = host === "localhost" || host === "127.0.0.1" || host === "::1" || host === "::ffff:127.0.0.1";
  if (u.protocol === "http:" && !insecure && !loopback) return undefined;
  return u.origin;
}

/** What --verbose prints for a call the hot path read itself (client/src/transport.ts requestId). */
export function logVerbose(plan: CallPlan, method: string, started: number): void {
  if (!plan.session.config.verbose) return;
  const writeErr = plan.session.config.writeErr ?? ((s: string) => void process.stderr.write(s));
  writeErr(`farm: ${method} x-request-id=${plan.requestId} ok ${Math.round(performance.now() - started)} ms\n`);
}
