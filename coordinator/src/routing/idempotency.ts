import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { Errors, farmError, refusal } from "@farm/shared/errors";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import type { IdempotencyClaim, IdempotencyStore } from "./idempotency-store.js";

/** How long a request id's outcome is kept (README: `--request-id`). */
export const IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000;

/** How a call's answer is kept in the database and read back. */
export interface AnswerCodec<T> {
  encode(value: T): string;
  decode(text: string): T;
}

export interface IdempotencyOptions {
  /** This coordinator process: a pending key it does not own is not waited for here. */
  owner: string;
  retentionMs?: number;
  now?: () => number;
  /** The outcome could not be stored: repeats will be told it is unknown. */
  onStoreFailure?: (err: unknown) => void;
}

/**
 * Results by (caller, request id), kept in the database so that a retry
 * through another replica, or after a restart, gets the first call's
 * outcome instead of running it again. A repeat with a different
 * fingerprint (target and canonical arguments) is a conflict. A repeat
 * while the first call runs in this process waits for it; while it runs
 * elsewhere, or when its coordinator stopped before recording it, the
 * repeat is told the outcome is unknown (IDEMPOTENCY_PENDING): never run
 * twice, never an outcome invented.
 */
export class Idempotency {
  /** First calls running in this process, for repeats that arrive meanwhile. */
  private readonly running = new Map<string, { fingerprint: string; result: Promise<unknown> }>();
  private readonly retentionMs: number;
  private readonly now: () => number;

  constructor(private readonly store: IdempotencyStore, private readonly opts: IdempotencyOptions) {
    this.retentionMs = opts.retentionMs ?? IDEMPOTENCY_RETENTION_MS;
    this.now = opts.now ?? Date.now;
  }

  run<T>(caller: string, requestId: string, fingerprint: string, codec: AnswerCodec<T>, call: () => Promise<T>): Promise<T> {
    const key = `${caller}\0${requestId}`;
    const here = this.running.get(key);
    if (here && here.fingerprint === fingerprint) return here.result as Promise<T>;
    // A different fingerprint: the database row decides (a conflict, unless that row expired meanwhile).
    if (here) return this.decide({ caller, requestId, fingerprint, owner: this.opts.owner }, codec, call);
    const result = this.decide({ caller, requestId, fingerprint, owner: this.opts.owner }, codec, call);
    this.running.set(key, { fingerprint, result });
    const forget = () => {
      if (this.running.get(key)?.result === result) this.running.delete(key);
    };
    result.then(forget, forget);
    return result;
  }

  /** Deletes expired keys in batches; returns how many went. */
  async sweep(batch = 500): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await this.store.sweep(this.now(), batch);
      total += n;
      if (n < batch) return total;
    }
  }

  private async decide<T>(c: IdempotencyClaim, codec: AnswerCodec<T>, call: () => Promise<T>): Promise<T> {
    // Twice at most: a row that expired between a failed claim and its read is claimed again.
    for (let attempt = 0; attempt < 2; attempt++) {
      const now = this.now();
      let claimed: boolean;
      try {
        claimed = await this.store.claim(c, now, now + this.retentionMs);
      } catch (err) {
        throw refusal(Errors.COORDINATOR_UNAVAILABLE, `could not record request id ${c.requestId}, so the call was not sent: ${(err as Error).message}`, "target.request_id");
      }
      if (claimed) return this.first(c, codec, call);
      const row = await this.store.read(c.caller, c.requestId, now);
      if (!row) continue;
      if (row.fingerprint !== c.fingerprint) {
        // Refused before the second call is sent: the first call's outcome is its own.
        throw refusal(Errors.IDEMPOTENCY_CONFLICT, `request id ${c.requestId} was used for a different request`, "target.request_id");
      }
      if (row.state === "done" && row.answer !== null) return codec.decode(row.answer);
      if (row.state === "done" && row.error !== null) throw decodeError(row.error);
      throw farmError(
        Errors.IDEMPOTENCY_PENDING,
        row.owner === c.owner
          ? `request id ${c.requestId}: the first call's outcome could not be recorded; check the device (farm activity, farm device ownership status) before acting again`
          : `request id ${c.requestId}: the first call has no recorded outcome yet: it is running through another coordinator, or that coordinator stopped before recording it; check the device (farm activity, farm device ownership status) before acting again`,
        "target.request_id",
        { dispatched: null, ambiguous: true },
      );
    }
    throw farmError(Errors.INTERNAL, `request id ${c.requestId} could not be claimed or read`, "target.request_id");
  }

  /** The first call: runs it and stores its outcome, whatever it is. */
  private async first<T>(c: IdempotencyClaim, codec: AnswerCodec<T>, call: () => Promise<T>): Promise<T> {
    let value: T;
    try {
      value = await call();
    } catch (err) {
      await this.record(c, { error: encodeError(err) });
      throw err;
    }
    await this.record(c, { answer: codec.encode(value) });
    return value;
  }

  private async record(c: IdempotencyClaim, outcome: { answer: string } | { error: string }): Promise<void> {
    try {
      // False: the row was re-claimed after expiring (a call longer than the retention); nothing of ours to write.
      await this.store.finish(c, outcome);
    } catch (err) {
      // The caller still gets the outcome; the row stays pending and repeats are told it is unknown.
      this.opts.onStoreFailure?.(err);
    }
  }
}

/** An error as stored: its status, message and farm detail. */
interface StoredError {
  status: Code;
  message: string;
  detail: JsonValue | null;
}

export function encodeError(err: unknown): string {
  const ce = ConnectError.from(err);
  const detail = ce.findDetails(ErrorDetailSchema)[0];
  const stored: StoredError = { status: ce.code, message: ce.rawMessage, detail: detail ? toJson(ErrorDetailSchema, detail) : null };
  return JSON.stringify(stored);
}

export function decodeError(text: string): ConnectError {
  const s = JSON.parse(text) as StoredError;
  const details = s.detail === null ? [] : [{ desc: ErrorDetailSchema, value: fromJson(ErrorDetailSchema, s.detail) }];
  return new ConnectError(s.message, s.status, undefined, details);
}
