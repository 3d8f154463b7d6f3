import type { Socket } from "node:net";
import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import {
  AgentAdbService,
  ServeAdbStreamRequestSchema,
  type ServeAdbStreamRequest,
  type ServeAdbStreamResponse,
} from "@farm/shared/gen/farm/v1/agent_adb_service_pb";

/** The coordinator's AgentAdbService.ServeAdbStream, as the relay uses it (tests stand in for the coordinator here). */
export type ServeAdbStream = (requests: AsyncIterable<ServeAdbStreamRequest>, signal: AbortSignal) => AsyncIterable<ServeAdbStreamResponse>;

/** ServeAdbStream on the agent's connection to the coordinator (the one ServeShell uses). */
export function serveAdbStreamOver(transport: Transport): ServeAdbStream {
  const client = createClient(AgentAdbService, transport);
  return (requests, signal) => client.serveAdbStream(requests, { signal });
}

/** Device bytes waiting for the coordinator above this pause the device socket. */
export const OUTGOING_HIGH_WATER_BYTES = 1024 * 1024;
/** The socket is read again once the queue is down to this. */
const OUTGOING_LOW_WATER_BYTES = 256 * 1024;
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
  onFromDevice?: (bytes: number) => void;
  onToDevice?: (bytes: number) => void;
  highWaterBytes?: number;
  lowWaterBytes?: number;
}

/**
 * Relays one open device service over its own ServeAdbStream call: the
 * first request names the stream, then device bytes go out as `data`
 * requests and response `data` is written to the device. Memory is bounded
 * both ways: the socket is paused while too much waits for the coordinator,
 * and responses are not read while the socket's write buffer is full. Either
 * side ending ends the other.
 *
 * Must be called in the same tick openDeviceService resolved in: the socket
 * is already flowing and data arriving with no listener would be lost.
 */
export function relayAdbStream(opts: RelayOptions): AdbStreamRelay {
  const { socket } = opts;
  const high = opts.highWaterBytes ?? OUTGOING_HIGH_WATER_BYTES;
  const low = Math.min(high, opts.lowWaterBytes ?? OUTGOING_LOW_WATER_BYTES);
  const call = new AbortController();
  let graceTimer: NodeJS.Timeout | undefined;
  const outgoing = new ByteQueue(low, {
    onLow: () => {
      if (!socket.destroyed) socket.resume();
    },
    // Everything from the device went out: the coordinator now has a while to end its side.
    onExhausted: () => (graceTimer ??= setTimeout(() => call.abort(), CLOSE_GRACE_MS).unref()),
  });

  const socketClosed = new Promise<void>((resolve) => {
    socket.on("data", (chunk: Buffer) => {
      opts.onFromDevice?.(chunk.length);
      if (outgoing.push(chunk) > high) socket.pause();
    });
    // The device (or the adb server) ended the stream: half-close ours so the
    // coordinator sees the end after the last bytes.
    socket.on("end", () => outgoing.close());
    socket.on("error", () => undefined); // "close" follows
    socket.on("close", () => {
      outgoing.close();
      resolve();
    });
  });
  outgoing.start(create(ServeAdbStreamRequestSchema, { kind: { case: "streamId", value: opts.streamId } }));
  if (opts.leftover.length > 0) {
    opts.onFromDevice?.(opts.leftover.length);
    outgoing.push(opts.leftover);
  }

  const inbound = (async () => {
    try {
      for await (const res of opts.serve(outgoing, call.signal)) {
        if (res.kind.case !== "data" || res.kind.value.length === 0) continue;
        if (socket.destroyed || socket.writableEnded) continue; // the device side is gone; wait for the coordinator to end
        opts.onToDevice?.(res.kind.value.length);
        if (!socket.write(res.kind.value)) await drained(socket);
      }
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

  return {
    done: Promise.all([socketClosed, inbound]).then(() => undefined),
    close() {
      outgoing.close();
      socket.destroy();
      call.abort();
    },
  };
}

/** Until the socket can take more, or will never take any. */
function drained(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      socket.off("drain", done);
      socket.off("close", done);
      resolve();
    };
    socket.on("drain", done);
    socket.on("close", done);
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
    private readonly on: { onLow: () => void; onExhausted: () => void },
  ) {}

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

  async *[Symbol.asyncIterator](): AsyncGenerator<ServeAdbStreamRequest, void, undefined> {
    try {
      if (this.first) yield this.first;
      for (;;) {
        const chunk = this.chunks.shift();
        if (chunk) {
          const before = this.queued;
          this.queued -= chunk.length;
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
