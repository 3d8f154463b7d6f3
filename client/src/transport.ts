import { randomUUID } from "node:crypto";
import { ConnectError, createClient, createContextKey, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { farmTransport } from "@farm/shared/farm-transport";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { rulesOf } from "@farm/shared/method-rules";
import { Errors, NOT_DISPATCHED, farmError } from "@farm/shared/errors";
import { FarmError } from "./farm-error.js";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import type { ClientConfig } from "./config.js";
import { isConnectionLost, isConnectionRefused } from "./coordinator-lost.js";
import { noStandaloneNote } from "./no-standalone.js";

/** A client for one farm service, authenticated with the resolved token. */
export function serviceClient<S extends DescService>(
  service: S,
  config: ClientConfig & { verbose?: boolean },
  opts: { lease?: string | undefined; session?: string | undefined; capture?: string | undefined; logPackage?: string | undefined; logFilter?: string | undefined } = {},
): Client<S> {
  if (!config.token) throw noTokenError(config);
  return createClient(service, clientTransport(config, { ...opts, interceptors: clientInterceptors(config) }));
}

/** The CLI's refusal when no token was found (it names the CLI's flags). */
export function noTokenError(config: ClientConfig): FarmError {
  return new FarmError(
    Errors.UNAUTHENTICATED,
    `no token: pass --token-file, set FARM_TOKEN, put a token in the config file, or run \`farm standalone\` locally${noStandaloneNote(config)}`,
    "token",
  );
}

/**
 * What every client call goes through, the CLI's and the library's alike:
 * an x-request-id, an unreachable coordinator explained (where the address
 * came from, a certificate not trusted), and the stop signal.
 */
export function clientInterceptors(config: ClientConfig & { verbose?: boolean }): Interceptor[] {
  const explain: Interceptor = (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      throw explainUnavailable(err, config, req.method);
    }
  };
  const stop = config.stopSignal;
  return [requestId(config.verbose === true, config.writeErr ?? ((s) => process.stderr.write(s))), explain, abortedByCaller, ...(stop ? [cancelledBy(stop)] : [])];
}

/** One call's own signal (@farm/client's `signal` option), for abortedByCaller: set by Wire.options. */
export const CALLER_SIGNAL = createContextKey<AbortSignal | undefined>(undefined);

/**
 * A call its caller aborted (CALLER_SIGNAL) ends CALL_CANCELLED, as a
 * stopped CLI's does (cancelledBy), not as an unknown fault. The signal is
 * joined to the request's here rather than given as the call's own, whose
 * abort reason would replace this answer. The coordinator passes the cancel
 * on to the agent.
 */
const abortedByCaller: Interceptor = (next) => async (req) => {
  const mine = req.contextValues.get(CALLER_SIGNAL);
  if (!mine) return next(req);
  const name = `${req.service.typeName}/${req.method.name}`;
  if (mine.aborted) throw farmError(Errors.CALL_CANCELLED, `${name} was not sent: its caller had cancelled it`, undefined, NOT_DISPATCHED);
  try {
    return await next({ ...req, signal: AbortSignal.any([req.signal, mine]) });
  } catch (err) {
    if (!mine.aborted) throw err;
    const outcome = rulesOf(req.method).readOnly ? undefined : { dispatched: null, ambiguous: true };
    throw farmError(
      Errors.CALL_CANCELLED,
      `${name} was cancelled by its caller; a change still waiting for a busy phone never runs, one already sent may still finish on the phone (see farm device ownership status)`,
      undefined,
      outcome,
      err,
    );
  }
};

/**
 * Every call also ends when the run is stopped (SIGINT, SIGTERM, a closed
 * stdout): a call blocked on a busy phone or a long shell command is
 * cancelled, not waited out. Cleanup that must still happen after a signal
 * (lease run's release) uses a config without the signal.
 */
function cancelledBy(stop: AbortSignal): Interceptor {
  return (next) => async (req) => {
    const name = `${req.service.typeName}/${req.method.name}`;
    if (stop.aborted) throw farmError(Errors.CALL_CANCELLED, `stopped before ${name} was sent`, undefined, NOT_DISPATCHED);
    try {
      return await next({ ...req, signal: AbortSignal.any([req.signal, stop]) });
    } catch (err) {
      if (!stop.aborted) throw err;
      // Sent, then cancelled: a change may or may not have reached the phone (ownership status tells).
      const outcome = rulesOf(req.method).readOnly ? undefined : { dispatched: null, ambiguous: true };
      throw farmError(Errors.CALL_CANCELLED, `stopped: ${name} was cancelled; a device command it started may still finish on the phone (see farm device ownership status)`, undefined, outcome, err);
    }
  };
}

/**
 * Tags every call with an x-request-id (a new one unless the caller set
 * it), so a call can be found in logs and proxies; with --verbose, prints
 * it with the method, the outcome and the time until the answer (the
 * start of the stream, for a streaming call) on stderr.
 */
export function requestId(verbose: boolean, writeErr: (text: string) => void, sent?: { id: string; started: number }): Interceptor {
  // `sent`: a call already made (the CLI's one-request path replays its answer here): its id and start time.
  return (next) => async (req) => {
    if (!req.header.has("x-request-id")) req.header.set("x-request-id", sent?.id ?? randomUUID());
    const id = req.header.get("x-request-id") as string;
    const started = sent?.started ?? performance.now();
    const log = (outcome: string) => {
      if (verbose) writeErr(`farm: ${req.service.typeName}/${req.method.name} x-request-id=${id} ${outcome} ${Math.round(performance.now() - started)} ms\n`);
    };
    try {
      const res = await next(req);
      log("ok");
      return res;
    } catch (err) {
      log(`failed: ${ConnectError.from(err).rawMessage.slice(0, 120)}`);
      throw err;
    }
  };
}

/** The transport every CLI call uses: token, lease and session headers, TLS roots or --ca-file, the cleartext rule. */
export function clientTransport(
  config: ClientConfig,
  opts: {
    lease?: string | undefined;
    session?: string | undefined;
    capture?: string | undefined;
    logPackage?: string | undefined;
    logFilter?: string | undefined;
    interceptors?: Interceptor[];
  } = {},
): Transport {
  const headers: Record<string, string> = {
    ...(opts.lease ? { "x-farm-lease": opts.lease } : {}),
    // Calls that are session steps (schema rule session_step) are recorded in it, with --capture's evidence.
    ...(opts.session ? { "x-farm-session": opts.session } : {}),
    ...(opts.capture ? { "x-farm-capture": opts.capture } : {}),
    ...(opts.logPackage ? { "x-farm-log-package": opts.logPackage } : {}),
    ...(opts.logFilter ? { "x-farm-log-filter": opts.logFilter } : {}),
  };
  if (!config.token) throw new FarmError(Errors.UNAUTHENTICATED, "no token", "token");
  return farmTransport({
    url: config.coordinator,
    token: config.token,
    caFile: config.caFile,
    insecure: config.insecure,
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    ...(opts.interceptors ? { interceptors: opts.interceptors } : {}),
    ...(config.connections ? { track: (m: Http2SessionManager) => config.connections?.track(m) } : {}),
  });
}

function explainUnavailable(err: unknown, config: ClientConfig, method: DescMethod): unknown {
  const ce = ConnectError.from(err);
  if (ce.findDetails(ErrorDetailSchema).length > 0) return err;
  if (/certificate|self[- ]signed|unable to verify|CERT_|ERR_TLS/i.test(ce.rawMessage)) {
    return farmError(
      Errors.TLS_VERIFY_FAILED,
      `the coordinator at ${config.coordinator} presented a certificate this client does not trust (${ce.rawMessage}); pass --ca-file (or FARM_CA_FILE) with the lab's CA`,
      "ca-file",
    );
  }
  const refused = isConnectionRefused(ce.rawMessage);
  const lost = isConnectionLost(ce.rawMessage);
  if (!refused && !lost) return err;
  // A call that changes something, lost mid-flight, has an unknown outcome (method rules in the schema).
  const outcome = !rulesOf(method).readOnly ? (refused ? { dispatched: false, ambiguous: false } : { dispatched: null, ambiguous: true }) : undefined;
  return farmError(
    Errors.COORDINATOR_UNAVAILABLE,
    refused
      ? `cannot reach the coordinator at ${config.coordinator} (from ${config.coordinatorSource}): ${ce.rawMessage}${noStandaloneNote(config)}`
      : `lost the coordinator at ${config.coordinator} mid-call: ${ce.rawMessage}${outcome?.ambiguous ? "; the outcome is unknown" : ""}`,
    "coordinator",
    outcome,
  );
}
