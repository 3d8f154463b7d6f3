import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { Errors, toErrorReport } from "@farm/shared/errors";
import type { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import type { Lease, LeaseSelector } from "@farm/shared/gen/farm/v1/lease_pb";
import { FarmError } from "./farm-error.js";

export interface AcquireRequest {
  selector: LeaseSelector;
  /** How long the coordinator may queue the request for a busy phone (0: answer at once). */
  waitMs: number;
  /** The lease's time to live (0: the coordinator's default). */
  ttlMs: number;
  /** The client-chosen ticket that keeps the request's place in the queue across retries. */
  ticket: string;
  /** When the wait ends (Date.now() ms). */
  deadline: number;
}

/**
 * Acquires a lease with a client-chosen ticket; if the coordinator goes
 * away while waiting (a restart), asks again with the same ticket until the
 * wait ends, which keeps the request's place in the queue. `signal`
 * cancels the wait (the coordinator drops the request from its queue); a
 * lease granted as the signal came is released at once, and `stopped()` is
 * what the caller learns. The release of such a lease must still go out,
 * so `client` must not carry the signal itself.
 */
export async function acquireWithTicket(
  client: Client<typeof LeaseService>,
  req: AcquireRequest,
  opts: { signal?: AbortSignal | undefined; stopped: () => Error; headers?: Record<string, string> },
): Promise<{ lease: Lease; token: string }> {
  const { signal, stopped } = opts;
  for (;;) {
    try {
      if (signal?.aborted) throw stopped();
      const remaining = () => Math.max(0, req.deadline - Date.now());
      const res = await client.acquireLease(
        { selector: req.selector, waitMs: remaining(), ttlMs: req.ttlMs, ticket: req.ticket },
        { timeoutMs: remaining() + 30_000, ...(signal ? { signal } : {}), ...(opts.headers ? { headers: opts.headers } : {}) },
      );
      if (!res.lease) throw new FarmError(Errors.INTERNAL, "the coordinator granted no lease", undefined, null);
      if (signal?.aborted) {
        // Granted as the signal came: nobody will use it, so it goes back now.
        await client.releaseLease({ token: res.token }, { timeoutMs: 10_000 }).catch(() => undefined);
        throw stopped();
      }
      return { lease: res.lease, token: res.token };
    } catch (err) {
      if (signal?.aborted) throw err instanceof FarmError ? err : stopped();
      const unavailable = ConnectError.from(err).code === Code.Unavailable && toErrorReport(err).code === Errors.COORDINATOR_UNAVAILABLE.code;
      if (!unavailable || Date.now() >= req.deadline) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}
