import { Errors, refusal } from "@farm/shared/errors";

/**
 * Results by (caller, request id). A repeat with the same fingerprint (target
 * and canonical arguments) gets the first call's outcome, even while that
 * call is still running; a different fingerprint is a conflict. Bounded:
 * the oldest keys are forgotten first.
 */
export class IdempotencyCache {
  private readonly entries = new Map<string, { fingerprint: string; result: Promise<unknown> }>();

  constructor(private readonly max = 10_000) {}

  run<T>(caller: string, requestId: string, fingerprint: string, call: () => Promise<T>): Promise<T> {
    const key = `${caller}\0${requestId}`;
    const hit = this.entries.get(key);
    if (hit) {
      if (hit.fingerprint !== fingerprint) {
        // Refused before the second call is sent: the first call's outcome is its own.
        return Promise.reject(refusal(Errors.IDEMPOTENCY_CONFLICT, `request id ${requestId} was used for a different request`, "target.request_id"));
      }
      return hit.result as Promise<T>;
    }
    const result = call();
    this.entries.set(key, { fingerprint, result });
    while (this.entries.size > this.max) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
    return result;
  }
}
