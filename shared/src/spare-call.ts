/** A bidi streaming call: its requests and cancel signal in, its responses out. */
export type StreamCall<Req, Res> = (requests: AsyncIterable<Req>, signal: AbortSignal) => AsyncIterable<Res>;

/** How long a started call may run before the next spare opens beside it. */
const REFILL_MS = 50;

/** A call started before it is needed: its headers are out and the server's handler waits for the first request. */
interface Spare<Req, Res> {
  own: AbortController;
  give(requests: AsyncIterable<Req>): void;
  responses: AsyncIterator<Res>;
  first: Promise<IteratorResult<Res>>;
  /** The server answered or the call failed before it was used: it cannot serve a stream. */
  spent: boolean;
}

/**
 * Starts streaming calls on calls opened ahead of need. Opening an HTTP/2
 * stream costs both ends a few event-loop turns (headers, authentication,
 * the framework's handler) that a short adb command (one `adb shell echo`)
 * would otherwise wait for on every hop; a spare has done them already and
 * its first request is all that travels. One spare is kept: opened after
 * each use, closed by close(). A spare that has heard anything from its
 * server before use (an error, the connection lost) is dropped and a fresh
 * call is started instead, so a stream never fails for a spare's sake.
 */
export class SpareCalls<Req, Res> {
  private spare: Spare<Req, Res> | undefined;
  private closed = false;

  constructor(private readonly call: StreamCall<Req, Res>) {}

  /** Starts a call with these requests: on the spare when it is sound, else a fresh one. */
  start(requests: AsyncIterable<Req>, signal: AbortSignal): AsyncIterable<Res> {
    const s = this.spare;
    this.spare = undefined;
    const refill = this.refillAfter();
    if (!s || s.spent) {
      s?.own.abort();
      return ended(this.call(requests, signal), refill);
    }
    const cancel = () => s.own.abort(signal.reason);
    if (signal.aborted) cancel();
    else signal.addEventListener("abort", cancel, { once: true });
    s.give(requests);
    return (async function* () {
      let finished = false;
      try {
        let r = await s.first;
        while (!r.done) {
          yield r.value;
          r = await s.responses.next();
        }
        finished = true;
      } finally {
        signal.removeEventListener("abort", cancel);
        // Stopped early (by its reader, or failed): the call goes with it, as a call's own iterator would take it.
        if (!finished) void s.responses.return?.();
        refill();
      }
    })();
  }

  /** Opens a spare now (a tunnel about to be used), if none is open. */
  prepare(): void {
    if (!this.closed && !this.spare) this.spare = this.open();
  }

  /** Closes the spare; later calls start fresh. */
  close(): void {
    this.closed = true;
    this.spare?.own.abort();
    this.spare?.give(empty());
    this.spare = undefined;
  }

  /**
   * The next spare opens once the call just started has ended, or after
   * REFILL_MS: opening it at once would put its setup on every hop beside
   * the short command it is meant to speed up.
   */
  private refillAfter(): () => void {
    let done = false;
    const refill = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      this.prepare();
    };
    const timer = setTimeout(refill, REFILL_MS);
    timer.unref();
    return refill;
  }

  private open(): Spare<Req, Res> {
    const own = new AbortController();
    let give!: (requests: AsyncIterable<Req>) => void;
    const given = new Promise<AsyncIterable<Req>>((resolve) => (give = resolve));
    async function* requests(): AsyncGenerator<Req> {
      yield* await given;
    }
    const responses = this.call(requests(), own.signal)[Symbol.asyncIterator]();
    const spare: Spare<Req, Res> = { own, give, responses, first: responses.next(), spent: false };
    // Anything before use (a response, an end, an error) spends it; the error is the used call's to report.
    spare.first.then(
      () => (spare.spent = true),
      () => (spare.spent = true),
    );
    return spare;
  }
}

async function* empty<T>(): AsyncGenerator<T> {}

/** The responses of a call, calling `after` once they end (or the reader stops). */
async function* ended<T>(responses: AsyncIterable<T>, after: () => void): AsyncGenerator<T> {
  try {
    yield* responses;
  } finally {
    after();
  }
}
