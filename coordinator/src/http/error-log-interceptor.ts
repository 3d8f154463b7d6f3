import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { Errors, farmError } from "@farm/shared/errors";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { withoutHostPaths } from "@farm/shared/host-paths";
import type { Logger } from "@farm/shared/log";
import { malformedRequestError, logMalformed } from "./malformed-request.js";
import { limitsOf } from "./message-limits.js";

/** Failures of this host (storage, bugs) rather than of the request. */
const hostFailureCodes = new Set<Code>([Code.Internal, Code.DataLoss, Code.Unknown]);

/**
 * The last word on every RPC's failure before it leaves the coordinator:
 * storage and internal failures are logged at error level with their code
 * and the method (with full paths, for the operator); the client gets the
 * same error with host paths reduced to relative names; a message over the
 * method's size cap carries MESSAGE_TOO_LARGE; a streamed request that
 * cannot be read is INVALID_ARGUMENT, logged at warn. Streamed responses
 * are covered too.
 */
export function errorLogInterceptor(log: Logger, hostRoots: readonly string[]): Interceptor {
  return (next) => async (req) => {
    const method = `${req.service.typeName}/${req.method.name}`;
    const outgoing = (err: unknown) => finalError(err, method, req.service.typeName, log, hostRoots);
    let res;
    try {
      res = await next(req);
    } catch (err) {
      throw outgoing(err);
    }
    if (!res.stream) return res;
    const messages = res.message;
    return {
      ...res,
      message: (async function* () {
        try {
          yield* messages;
        } catch (err) {
          throw outgoing(err);
        }
      })(),
    };
  };
}

function finalError(err: unknown, method: string, service: string, log: Logger, hostRoots: readonly string[]): ConnectError {
  const ce = ConnectError.from(err);
  const detail = ce.findDetails(ErrorDetailSchema)[0];
  if (!detail && ce.code === Code.ResourceExhausted && /readMaxBytes/.test(ce.rawMessage)) {
    return farmError(Errors.MESSAGE_TOO_LARGE, `a message of ${method} is larger than the ${limitsOf(service).messageMaxBytes} bytes it accepts`);
  }
  const unreadable = malformedRequestError(ce);
  if (unreadable) {
    logMalformed(log, method, unreadable);
    return unreadable;
  }
  const code = detail?.code || Code[ce.code];
  const errno = errnoOf(err);
  // A storage failure carries its errno as the error's cause, whatever its code.
  if (hostFailureCodes.has(ce.code) || errno !== undefined) {
    log.error("call failed on the coordinator", { method, code, grpcCode: Code[ce.code], ...(errno ? { errno } : {}), error: ce.rawMessage });
  }
  const message = withoutHostPaths(ce.rawMessage, hostRoots);
  if (message === ce.rawMessage) return ce;
  const scrubbed = new ConnectError(message, ce.code, ce.metadata, undefined, ce.cause);
  scrubbed.details = ce.details;
  return scrubbed;
}

function errnoOf(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  const code = typeof e?.code === "string" ? e.code : e?.cause?.code;
  return typeof code === "string" && /^E[A-Z]+$/.test(code) ? code : undefined;
}
