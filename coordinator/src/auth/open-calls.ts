import { ConnectError, type StreamRequest, type StreamResponse, type UnaryRequest, type UnaryResponse } from "@connectrpc/connect";
import { Errors, farmError } from "@farm/shared/errors";

/** What an agent detached by revocation shows as its offline reason. */
export const TOKEN_REVOKED = "token revoked";

const revocations = new WeakSet<object>();

/** Whether an abort reason is a token revocation (not a disconnect or deadline). */
export function isRevocation(reason: unknown): boolean {
  return typeof reason === "object" && reason !== null && revocations.has(reason);
}

function revokedError(tokenName: string): ConnectError {
  const err = farmError(Errors.UNAUTHENTICATED, `${TOKEN_REVOKED}: "${tokenName}" was revoked while this call was open`);
  revocations.add(err);
  return err;
}

type Next = (req: UnaryRequest | StreamRequest) => Promise<UnaryResponse | StreamResponse>;

/**
 * Every call in flight, by the name of the token that authenticated it, so
 * revoking a token ends what it opened: Watch streams, agent attach
 * sessions, uploads, waits. Checking the token at the start of a call is
 * not enough for calls that last hours.
 */
export class OpenCalls {
  private readonly byToken = new Map<string, Set<OpenCall>>();

  /** Open calls of a token, for tests and metrics. */
  count(tokenName: string): number {
    return this.byToken.get(tokenName)?.size ?? 0;
  }

  /** Ends every open call of this token with UNAUTHENTICATED; returns how many. */
  revoke(tokenName: string): number {
    const calls = this.byToken.get(tokenName);
    if (!calls) return 0;
    this.byToken.delete(tokenName);
    for (const c of calls) c.revoke(revokedError(tokenName));
    return calls.size;
  }

  /**
   * Runs the call with a signal that also aborts on revocation, and fails it
   * (and its streams, both ways) with UNAUTHENTICATED the moment the token is
   * revoked. The handler's own signal (ctx.signal) is that signal, so
   * handlers that already stop on abort stop here too.
   */
  async run(tokenName: string, req: UnaryRequest | StreamRequest, next: Next): Promise<UnaryResponse | StreamResponse> {
    // Every call passes here: a revocation reaches it by a direct call, not by event listeners on
    // signals of its own (a unary call's listeners and controllers were most of its authentication cost).
    const handler = new AbortController();
    // Streams check revocation between messages, on a signal: only they get one.
    let streamRevoke = req.stream ? new AbortController() : undefined;
    let revokedBy: Error | undefined;
    let rejectRevoked: (reason: Error) => void = () => undefined;
    // Only a revocation fails the call from here; every other abort is the handler's to answer.
    const revoked = new Promise<never>((_, reject) => {
      rejectRevoked = reject;
    });
    revoked.catch(() => undefined);
    const call: OpenCall = {
      revoke: (reason) => {
        revokedBy = reason;
        handler.abort(reason);
        streamRevoke?.abort(reason);
        rejectRevoked(reason);
      },
    };
    const calls = this.byToken.get(tokenName) ?? new Set<OpenCall>();
    calls.add(call);
    this.byToken.set(tokenName, calls);
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      req.signal.removeEventListener("abort", fromCaller);
      const set = this.byToken.get(tokenName);
      set?.delete(call);
      if (set?.size === 0) this.byToken.delete(tokenName);
    };
    // A call its caller ended is no longer the token's to end (and its response may never be read).
    function fromCaller(): void {
      handler.abort(req.signal.reason);
      close();
    }
    if (req.signal.aborted) fromCaller();
    else req.signal.addEventListener("abort", fromCaller, { once: true });
    const revocationSignal = (): AbortSignal => {
      if (!streamRevoke) {
        streamRevoke = new AbortController();
        if (revokedBy) streamRevoke.abort(revokedBy);
      }
      return streamRevoke.signal;
    };
    try {
      const guarded = req.stream ? { ...req, signal: handler.signal, message: guard(req.message, revocationSignal()) } : { ...req, signal: handler.signal };
      const res = await Promise.race([next(guarded), revoked]);
      if (!res.stream) {
        close();
        return res;
      }
      return { ...res, message: guard(res.message, revocationSignal(), close) };
    } catch (err) {
      close();
      throw err;
    }
  }
}

/** A call in flight, as its token's revocation reaches it. */
interface OpenCall {
  revoke(reason: Error): void;
}

/** The same messages until the source ends or the token is revoked (then its error). */
async function* guard<T>(source: AsyncIterable<T>, revoked: AbortSignal, done?: () => void): AsyncGenerator<T> {
  const it = source[Symbol.asyncIterator]();
  let finished = false;
  try {
    for (;;) {
      const r = await nextUnlessAborted(it, revoked);
      if (r.done) {
        finished = true;
        return;
      }
      yield r.value;
    }
  } finally {
    done?.();
    // Not awaited: the source may be parked in an await that only the aborted signal ends.
    if (!finished) void Promise.resolve(it.return?.()).catch(() => undefined);
  }
}

/**
 * The iterator's next result, or the signal's reason once it aborts. Not a
 * Promise.race against one long-lived promise: every race adds a reaction to
 * it that holds the race's result, so a stream kept every message it had
 * ever passed (a 400 MiB push, 400 MiB held) until it ended.
 */
function nextUnlessAborted<T>(it: AsyncIterator<T>, signal: AbortSignal): Promise<IteratorResult<T>> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    it.next().then(
      (r) => {
        signal.removeEventListener("abort", onAbort);
        resolve(r);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err as Error);
      },
    );
  });
}
