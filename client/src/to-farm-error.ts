import { Errors, errorSpecOf, toErrorReport, type FarmErrorSpec } from "@farm/shared/errors";
import { FarmError } from "./farm-error.js";

/**
 * Any failure of a call as a FarmError: the coordinator's code, message,
 * field and outcome as it sent them. A code this build does not know (a
 * newer coordinator) is kept, with the gRPC status and exit code of an
 * internal fault.
 */
export function toFarmError(err: unknown): FarmError {
  if (err instanceof FarmError) return err;
  const r = toErrorReport(err);
  const spec = errorSpecOf(r.code) ?? ({ ...Errors.INTERNAL, code: r.code } as FarmErrorSpec);
  const outcome = r.dispatched !== undefined || r.ambiguous !== undefined
    ? { dispatched: r.dispatched ?? null, ambiguous: r.ambiguous ?? false, ...(r.actionId ? { actionId: r.actionId } : {}), ...(r.agentId ? { agentId: r.agentId } : {}) }
    : null;
  const wrapped = new FarmError(spec, r.message, r.field, outcome, { cause: err });
  asSent.set(wrapped, err);
  return wrapped;
}

/** FarmErrors made from a call's failure, and that failure as it came. */
const asSent = new WeakMap<FarmError, unknown>();

/**
 * The failure a FarmError was made from, as the transport raised it (the
 * coordinator's error with its detail), or the error itself when the
 * library raised it. The CLI reports this one, naming fields by its flags.
 */
export function failureAsSent(err: unknown): unknown {
  return err instanceof FarmError && asSent.has(err) ? asSent.get(err) : err;
}

/** Runs one call, its failure as a FarmError. */
export async function farmCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw toFarmError(err);
  }
}

/** A stream's messages as they arrive, its failure as a FarmError (breaking out of the loop ends the call). */
export async function* farmStream<T>(open: () => AsyncIterable<T>): AsyncGenerator<T> {
  try {
    for await (const m of open()) yield m;
  } catch (err) {
    throw toFarmError(err);
  }
}
