import { Code, ConnectError } from "@connectrpc/connect";

/** One gRPC length-prefixed message as it came: its flags byte (bit 0: compressed) and its bytes. */
export interface Envelope {
  flags: number;
  data: Buffer;
}

export interface EnvelopeInboxOptions {
  /** An envelope announcing more than this is refused from its 5-byte prefix, before its bytes are held. */
  maxBytes: number;
  /** Above this many bytes of whole messages not yet taken, the source is paused (HTTP/2 flow control then holds the sender); a partial message is bounded by maxBytes instead. */
  highWaterBytes: number;
  pause(): void;
  resume(): void;
}

/**
 * The messages of one direction of a gRPC stream, split from DATA chunks of
 * any size and taken one at a time by an async iterator. A slow taker
 * pauses the source once `highWaterBytes` of whole messages wait, so what a
 * stream holds here is bounded by that, one message being assembled (at
 * most `maxBytes`) and one chunk, whatever the peer sends. The owner
 * feeds it: push (which throws a ConnectError for an envelope over the
 * cap), end, fail.
 */
export class EnvelopeInbox implements AsyncIterable<Envelope> {
  readonly #opts: EnvelopeInboxOptions;
  readonly #ready: Envelope[] = [];
  /** Bytes of the envelope being assembled. */
  #parts: Buffer[] = [];
  #partBytes = 0;
  /** The prefix of the envelope being assembled, once its 5 bytes are in. */
  #head: { flags: number; length: number } | undefined;
  /** Bytes of whole messages not yet taken. */
  #readyBytes = 0;
  #paused = false;
  #ended = false;
  #error: unknown;
  #failed = false;
  #wake: (() => void) | undefined;

  constructor(opts: EnvelopeInboxOptions) {
    this.#opts = opts;
  }

  /** Bytes held now: whole messages not yet taken and a partial one. */
  get heldBytes(): number {
    return this.#readyBytes + this.#partBytes;
  }

  push(chunk: Buffer): void {
    if (this.#ended || this.#failed || chunk.length === 0) return;
    this.#parts.push(chunk);
    this.#partBytes += chunk.length;
    for (;;) {
      if (this.#head === undefined) {
        if (this.#partBytes < 5) break;
        const head = this.#take(5);
        const length = head.readUInt32BE(1);
        if (length > this.#opts.maxBytes) throw new ConnectError(`message size ${length} is larger than configured readMaxBytes ${this.#opts.maxBytes}`, Code.ResourceExhausted);
        this.#head = { flags: head[0] as number, length };
      }
      if (this.#partBytes < this.#head.length) break;
      this.#ready.push({ flags: this.#head.flags, data: this.#head.length === 0 ? Buffer.alloc(0) : this.#take(this.#head.length) });
      this.#readyBytes += this.#head.length + 5; // with its prefix: empty messages count too
      this.#head = undefined;
    }
    if (this.#ready.length > 0) this.#signal();
    if (!this.#paused && this.#readyBytes > this.#opts.highWaterBytes) {
      this.#paused = true;
      this.#opts.pause();
    }
  }

  /** The sender finished; a partial envelope left over is a protocol error. */
  end(): void {
    if (this.#ended || this.#failed) return;
    if (this.#head !== undefined || this.#partBytes > 0) {
      this.fail(new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument));
      return;
    }
    this.#ended = true;
    this.#signal();
  }

  /**
   * Ends the messages with an error: the taker gets what is ready, then
   * this; with `now` (the caller gave up) what is ready is dropped too.
   */
  fail(err: unknown, now = false): void {
    if (this.#failed || (this.#ended && !now)) return;
    this.#failed = true;
    this.#error = err;
    this.#parts = [];
    if (now) {
      this.#ready.length = 0;
      this.#readyBytes = 0;
    }
    this.#signal();
  }

  /** The next envelope; undefined at the end. */
  async next(): Promise<Envelope | undefined> {
    for (;;) {
      const env = this.#ready.shift();
      if (env !== undefined) {
        this.#readyBytes -= env.data.length + 5;
        if (this.#paused && this.#readyBytes <= this.#opts.highWaterBytes / 2) {
          this.#paused = false;
          this.#opts.resume();
        }
        return env;
      }
      if (this.#failed) throw this.#error;
      if (this.#ended) return undefined;
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Envelope, void, undefined> {
    for (let env = await this.next(); env !== undefined; env = await this.next()) yield env;
  }

  #signal(): void {
    const w = this.#wake;
    this.#wake = undefined;
    w?.();
  }

  #take(n: number): Buffer {
    const first = this.#parts[0] as Buffer;
    let out: Buffer;
    if (first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.#parts.shift();
      else this.#parts[0] = first.subarray(n);
    } else {
      out = Buffer.allocUnsafe(n);
      let at = 0;
      while (at < n) {
        const c = this.#parts[0] as Buffer;
        const use = Math.min(c.length, n - at);
        c.copy(out, at, 0, use);
        at += use;
        if (use === c.length) this.#parts.shift();
        else this.#parts[0] = c.subarray(use);
      }
    }
    this.#partBytes -= n;
    return out;
  }
}
