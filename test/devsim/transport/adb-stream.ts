import { Command } from "../protocol/constants.js";

/** What a stream needs from its connection. */
export interface StreamLink {
  /** payload may come in parts (a WRTE coalesced from several writes), sent without concatenation. */
  send(command: number, arg0: number, arg1: number, payload?: Buffer | readonly Buffer[]): void;
  /** Negotiated max payload: no WRTE may be larger. */
  readonly maxPayload: number;
  /** Called once the stream is closed either way, so the connection forgets it. */
  forget(localId: number): void;
}

/** The device end of one adb stream, as a service sees it. */
export interface ServiceStream {
  /**
   * Queues bytes for the host. Resolves when the queue has room again (flow
   * control), or at once if the stream is closed — check `signal` to stop.
   */
  write(data: Uint8Array | string): Promise<void>;
  /** Next chunk the host wrote, or null once the stream is closed. */
  read(): Promise<Buffer | null>;
  /** Flushes queued data, then closes the stream with CLSE. */
  end(): void;
  /** Aborted once the stream is closed: by the host, by end(), or by a dropped connection. */
  readonly signal: AbortSignal;
  readonly closed: boolean;
  readonly maxPayload: number;
}

/**
 * One stream with adbd's flow control: at most one WRTE in flight towards the
 * host, each at most maxPayload bytes; the next goes out on the host's OKAY.
 * Host WRTEs are acknowledged when the service reads them ("consumed"), so a
 * service that stops reading applies backpressure to the host.
 */
export class AdbStream implements ServiceStream {
  private readonly abort = new AbortController();
  private readonly outQueue: Buffer[] = [];
  private outBytes = 0;
  private inFlight = false;
  private ending = false;
  private isClosed = false;
  private writeWaiters: Array<() => void> = [];
  private readonly inbox: Buffer[] = [];
  private readWaiters: Array<(chunk: Buffer | null) => void> = [];

  constructor(
    readonly localId: number,
    readonly remoteId: number,
    private readonly link: StreamLink,
  ) {}

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  get maxPayload(): number {
    return this.link.maxPayload;
  }

  /** Writers wait while more than this many bytes are queued. */
  private get highWater(): number {
    return this.link.maxPayload;
  }

  write(data: Uint8Array | string): Promise<void> {
    if (this.isClosed || this.ending) return Promise.resolve();
    const chunk = typeof data === "string" ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    if (chunk.length === 0) return Promise.resolve();
    this.outQueue.push(chunk);
    this.outBytes += chunk.length;
    this.pump();
    if (this.outBytes <= this.highWater) return Promise.resolve();
    return new Promise((resolve) => this.writeWaiters.push(resolve));
  }

  read(): Promise<Buffer | null> {
    const chunk = this.inbox.shift();
    if (chunk) {
      this.ack();
      return Promise.resolve(chunk);
    }
    if (this.isClosed) return Promise.resolve(null);
    return new Promise((resolve) => this.readWaiters.push(resolve));
  }

  end(): void {
    if (this.isClosed || this.ending) return;
    this.ending = true;
    this.pump();
  }

  // --- called by the connection -------------------------------------------

  /** Host acknowledged our last WRTE. */
  onOkay(): void {
    this.inFlight = false;
    this.pump();
  }

  /** Host wrote data to us. */
  onWrite(payload: Buffer): void {
    if (this.isClosed) return;
    const reader = this.readWaiters.shift();
    if (reader) {
      this.ack();
      reader(payload);
    } else {
      this.inbox.push(payload);
    }
  }

  /** Host closed the stream: stop the service and echo CLSE as adbd does. */
  onRemoteClose(): void {
    if (this.isClosed) return;
    this.link.send(Command.CLSE, this.localId, this.remoteId);
    this.markClosed();
  }

  /** The connection is gone; nothing can be sent any more. */
  destroy(): void {
    this.markClosed();
  }

  // --- internals ----------------------------------------------------------

  private ack(): void {
    if (!this.isClosed) this.link.send(Command.OKAY, this.localId, this.remoteId);
  }

  private pump(): void {
    if (this.isClosed) return;
    if (!this.inFlight && this.outBytes > 0) {
      const chunk = this.takeChunk(this.link.maxPayload);
      this.inFlight = true;
      this.link.send(Command.WRTE, this.localId, this.remoteId, chunk);
      this.releaseWriters();
    }
    // Like adbd, CLSE may follow the last WRTE before that WRTE's OKAY.
    if (this.ending && this.outBytes === 0) {
      this.link.send(Command.CLSE, this.localId, this.remoteId);
      this.markClosed();
    }
  }

  /** Takes queued writes for one WRTE payload of at most max bytes (as parts, not copied). */
  private takeChunk(max: number): Buffer[] {
    const parts: Buffer[] = [];
    let size = 0;
    while (size < max && this.outQueue.length > 0) {
      const next = this.outQueue[0]!;
      const used = Math.min(next.length, max - size);
      parts.push(used === next.length ? next : next.subarray(0, used));
      size += used;
      if (used === next.length) this.outQueue.shift();
      else this.outQueue[0] = next.subarray(used);
    }
    this.outBytes -= size;
    return parts;
  }

  private releaseWriters(): void {
    if (this.outBytes > this.highWater) return;
    const waiters = this.writeWaiters;
    this.writeWaiters = [];
    for (const resolve of waiters) resolve();
  }

  private markClosed(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.outQueue.length = 0;
    this.outBytes = 0;
    this.inbox.length = 0;
    for (const resolve of this.writeWaiters) resolve();
    this.writeWaiters = [];
    for (const resolve of this.readWaiters) resolve(null);
    this.readWaiters = [];
    this.abort.abort(new Error("stream closed"));
    this.link.forget(this.localId);
  }
}
