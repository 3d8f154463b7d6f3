import type { Socket } from "node:net";
import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { stageTrace } from "@farm/shared/stage-trace";
import { ByteBudget } from "./byte-budget.js";
import { AgentAdbService, ServeAdbStreamRequestSchema, type ServeAdbStreamRequest, type ServeAdbStreamResponse } from "@farm/shared/gen/farm/v1/agent_adb_service_pb";

/** The coordinator's AgentAdbService.ServeAdbStream, as the relay uses it (tests stand in for the coordinator here). */
export type ServeAdbStream = (requests: AsyncIterable<ServeAdbStreamRequest>, signal: AbortSignal) => AsyncIterable<ServeAdbStreamResponse>;

/** ServeAdbStream on the agent's connection to the coordinator (the one ServeShell uses). */
export function serveAdbStreamOver(transport: Transport): ServeAdbStream {
  const client = createClient(AgentAdbService, transport);
  return (requests, signal) => client.serveAdbStream(requests, { signal });
}

/** Device bytes waiting for the coordinator above this pause the device socket. */
export const OUTGOING_HIGH_WATER_BYTES = 256 * 1024;
/** The socket is read again once the queue is down to this. */
const OUTGOING_LOW_WATER_BYTES = 64 * 1024;
/** Bytes for the device a stream may leave in its socket's buffer before it stops reading the coordinator. */
export const SOCKET_AHEAD_BYTES = 2 * 1024 * 1024;
/** The most device bytes one ServeAdbStream message carries when queued reads are joined (well under the call's 2 MiB message cap). */
export const MESSAGE_BYTES = 256 * 1024;
/** After the device side closed, how long the coordinator has to end its side before the call is cut. */
const CLOSE_GRACE_MS = 5_000;

export interface AdbStreamRelay {
  /** Resolves once the device socket is closed and the ServeAdbStream call has ended. */
  readonly done: Promise<void>;
  /** Cuts both sides at once (the tunnel closes). */
  close(): void;
}

export interface RelayOptions {
  streamId: string;
  /** The device service's socket, as openDeviceService returned it. */
  socket: Socket;
  /** Bytes that came with the service's OKAY: the device's first output. */
  leftover: Buffer;
  serve: ServeAdbStream;
  /** What the stream's bytes count against while the agent holds them (its tunnel's budget); unbounded beyond the stream's own queues when absent. */
  budget?: ByteBudget;
  onFromDevice?: (bytes: number) => void;
  onToDevice?: (bytes: number) => void;
  highWaterBytes?: number;
  lowWaterBytes?: number;
  /** The stream's id in the remote adb benchmark's marks (stage-trace.ts), when tracing. */
  trace?: string;
}

/**
 * Relays one open device service over its own ServeAdbStream call: the
 * first request names the stream, then device bytes go out as `data`
 * requests and response `data` is written to the device. Memory is bounded
 * both ways: the socket is paused while too much waits for the coordinator
 * or the budget is spent, and responses are not read while the socket's
 * write buffer is full or the budget is spent (the call's HTTP/2 window then
 * stalls the coordinator). Either side ending ends the other, and close()
 * ends both at once even while the phone reads nothing.
 *
 * Must be called in the same tick openDeviceService resolved in: the socket
 * is already flowing and data arriving with no listener would be lost.
 */
export function relayAdbStream(opts: RelayOptions): AdbStreamRelay {
  const { socket } = opts;
  const high = opts.highWaterBytes ?? OUTGOING_HIGH_WATER_BYTES;
  const low = Math.min(high, opts.lowWaterBytes ?? OUTGOING_LOW_WATER_BYTES);
  const call = new AbortController();
  const budget = opts.budget ?? new ByteBudget(Number.MAX_SAFE_INTEGER);
  /** Bytes this stream holds against the budget, each way: all given back when it ends. */
  const held = { from: 0, to: 0 };
  const give = (way: "from" | "to", n: number) => {
    const back = Math.min(n, held[way]);
    held[way] -= back;
    budget.release(back);
  };
  let graceTimer: NodeJS.Timeout | undefined;
  let paused = false;
  let awaitingRoom = false;
  /** Reads the device again once room comes back: another stream's bytes went on, or this one's did. */
  const whenRoom = () => {
    if (awaitingRoom) return;
    awaitingRoom = true;
    void budget.room(0, call.signal).then(() => {
      awaitingRoom = false;
      pauseOrResume();
    });
  };
  const pauseOrResume = () => {
    if (socket.destroyed || call.signal.aborted) return;
    const overBudget = !budget.fits(0);
    if (!paused && (outgoing.queuedBytes > high || overBudget)) {
      paused = true;
      socket.pause();
    } else if (paused && outgoing.queuedBytes <= low && !overBudget) {
      paused = false;
      socket.resume();
    }
    if (paused && overBudget) whenRoom();
  };
  const outgoing = new ByteQueue(low, {
    onLow: () => pauseOrResume(),
    onTaken: (n) => {
      give("from", n);
      if (paused) pauseOrResume();
    },
    // Everything from the device went out: the coordinator now has a while to end its side.
    onExhausted: () => (graceTimer ??= setTimeout(() => call.abort(), CLOSE_GRACE_MS).unref()),
  });

  const marked = new Set<string>();
  const mark = (stage: string) => {
    if (!opts.trace || marked.has(stage)) return;
    marked.add(stage);
    stageTrace?.mark(opts.trace, stage);
  };
  const socketClosed = new Promise<void>((resolve) => {
    socket.on("data", (chunk: Buffer) => {
      mark("agent.device-data");
      opts.onFromDevice?.(chunk.length);
      held.from += chunk.length;
      budget.take(chunk.length);
      outgoing.push(chunk);
      pauseOrResume();
    });
    // The device (or the adb server) ended the stream: half-close ours so the
    // coordinator sees the end after the last bytes.
    socket.on("end", () => {
      mark("agent.device-end");
      outgoing.close();
    });
    socket.on("error", () => undefined); // "close" follows
    socket.on("close", () => {
      outgoing.close();
      resolve();
    });
  });
  outgoing.start(create(ServeAdbStreamRequestSchema, { kind: { case: "streamId", value: opts.streamId } }));
  if (opts.leftover.length > 0) {
    opts.onFromDevice?.(opts.leftover.length);
    held.from += opts.leftover.length;
    budget.take(opts.leftover.length);
    outgoing.push(opts.leftover);
  }

  const inbound = (async () => {
    try {
      for await (const res of opts.serve(outgoing, call.signal)) {
        if (res.kind.case !== "data" || res.kind.value.length === 0) continue;
        if (socket.destroyed || socket.writableEnded) continue; // the device side is gone; wait for the coordinator to end
        const n = res.kind.value.length;
        mark("agent.to-device");
        // Over budget, the next response is not read: the call's window fills and the coordinator waits.
        await budget.room(n, call.signal);
        if (call.signal.aborted) break;
        opts.onToDevice?.(n);
        held.to += n;
        budget.take(n);
        // Given back once the bytes left for the adb server (or were dropped with the socket).
        socket.write(res.kind.value, () => give("to", n));
        // The budget bounds what waits in the socket; this only keeps one stream from taking all of it.
        // Waiting for every write to drain left the coordinator's stream unread meanwhile.
        if (socket.writableLength > SOCKET_AHEAD_BYTES) await drained(socket, call.signal);
        if (call.signal.aborted) break;
      }
      if (call.signal.aborted) throw new Error("the stream was closed");
      // The caller closed its adb stream: what was written still reaches the device,
      // and the adb server closes the socket once it has passed the end on.
      socket.end();
      setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref();
    } catch {
      // The coordinator, the caller or the tunnel went away.
      socket.destroy();
    } finally {
      clearTimeout(graceTimer);
      outgoing.close();
    }
  })();
  // Whatever the stream still holds is freed once it has ended both ways.
  const freed = Promise.all([socketClosed, inbound]).then(() => {
    give("to", held.to);
    give("from", held.from);
  });

  return {
    done: freed,
    close() {
      outgoing.close();
      socket.destroy();
      call.abort();
    },
  };
}

/** Until the socket can take more, will never take any, or the stream is closed. */
function drained(socket: Socket, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      socket.off("drain", done);
      socket.off("close", done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    if (signal.aborted) return resolve();
    socket.on("drain", done);
    socket.on("close", done);
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * The request side of one ServeAdbStream call: device chunks queued for the
 * coordinator, counted in bytes so the reader of the device can be paused.
 * Consumed once, as the call's request iterable.
 */
class ByteQueue implements AsyncIterable<ServeAdbStreamRequest> {
  private readonly chunks: Buffer[] = [];
  private first: ServeAdbStreamRequest | undefined;
  private queued = 0;
  private closed = false;
  private notify: (() => void) | undefined;

  constructor(
    private readonly lowWater: number,
    private readonly on: { onLow: () => void; onExhausted: () => void; onTaken: (bytes: number) => void },
  ) {}

  /** Device bytes waiting for the coordinator. */
  get queuedBytes(): number {
    return this.queued;
  }

  start(first: ServeAdbStreamRequest): void {
    this.first = first;
  }

  /** Queues a chunk; returns the bytes now waiting. */
  push(chunk: Buffer): number {
    if (this.closed) return this.queued;
    this.chunks.push(chunk);
    this.queued += chunk.length;
    this.wake();
    return this.queued;
  }

  close(): void {
    this.closed = true;
    this.wake();
  }

  private wake(): void {
    const n = this.notify;
    this.notify = undefined;
    n?.();
  }

  /**
   * The next message's bytes: the oldest chunk, joined with those queued
   * behind it up to MESSAGE_BYTES. Chunks queue only while the call is
   * slower than the socket (a pull), and there each message costs every
   * hop its framing and a turn of its loop whatever its size: joined, the
   * phone's 64 KiB reads travel as a few larger messages. Nothing waits to
   * be joined: a lone chunk goes as it is.
   */
  private take(): Buffer | undefined {
    const first = this.chunks.shift();
    if (!first || this.chunks.length === 0 || first.length >= MESSAGE_BYTES) return first;
    const parts = [first];
    let size = first.length;
    while (this.chunks.length > 0 && size + (this.chunks[0] as Buffer).length <= MESSAGE_BYTES) {
      const next = this.chunks.shift() as Buffer;
      parts.push(next);
      size += next.length;
    }
    return parts.length === 1 ? first : Buffer.concat(parts, size);
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ServeAdbStreamRequest, void, undefined> {
    try {
      if (this.first) yield this.first;
      for (;;) {
        const chunk = this.take();
        if (chunk) {
          const before = this.queued;
          this.queued -= chunk.length;
          this.on.onTaken(chunk.length);
          if (before > this.lowWater && this.queued <= this.lowWater) this.on.onLow();
          yield create(ServeAdbStreamRequestSchema, { kind: { case: "data", value: chunk } });
          continue;
        }
        if (this.closed) {
          this.on.onExhausted();
          return;
        }
        await new Promise<void>((resolve) => (this.notify = resolve));
      }
    } finally {
      this.close();
      this.chunks.length = 0;
      this.queued = 0;
    }
  }
}
