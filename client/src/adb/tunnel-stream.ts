import { Duplex } from "node:stream";
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { AdbTunnelService, OpenAdbStreamRequestSchema, type OpenAdbStreamRequest, type OpenAdbStreamResponse } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { Errors, farmError } from "@farm/shared/errors";
import { SpareCalls } from "@farm/shared/spare-call";
import { stageTrace } from "@farm/shared/stage-trace";

type TunnelClient = Client<typeof AdbTunnelService>;

/** A tunnel's OpenAdbStream calls, each started on a call opened ahead of need (shared/spare-call.ts). */
export type TunnelStreamCalls = SpareCalls<OpenAdbStreamRequest, OpenAdbStreamResponse>;

export function tunnelStreamCalls(client: TunnelClient): TunnelStreamCalls {
  return new SpareCalls((requests, signal) => client.openAdbStream(requests, { signal }));
}

/**
 * Bytes from the local adb server a stream takes before they are on the
 * wire. adb sends one WRTE and waits for its OKAY; acknowledging only once
 * the coordinator had the bytes made each WRTE wait a round trip, so a push
 * moved at the speed of latency. Up to this much is acknowledged at once.
 */
const WRITE_AHEAD_BYTES = 4 * 1024 * 1024;

/**
 * The phone's bytes a stream reads ahead of the host: what arrives while one
 * WRTE waits for its OKAY is sent as the next WRTE (adbd-stream.ts), so this
 * is about one WRTE's worth (adb's largest payload).
 */
const READ_AHEAD_BYTES = 1024 * 1024;

/**
 * The write side of a call: at most one chunk waits, and its write callback
 * runs only when the RPC asks for the next message, so the bytes adb gives
 * us wait for the HTTP/2 stream instead of piling up in memory.
 */
class RequestFeed {
  private pending: { chunk: Uint8Array; done: (err?: Error | null) => void } | undefined;
  private ended = false;
  private wake: (() => void) | undefined;

  put(chunk: Uint8Array, done: (err?: Error | null) => void): void {
    this.pending = { chunk, done };
    this.poke();
  }

  end(): void {
    this.ended = true;
    this.poke();
  }

  private poke(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  async *messages(first: OpenAdbStreamRequest): AsyncGenerator<OpenAdbStreamRequest> {
    yield first;
    for (;;) {
      while (!this.pending && !this.ended) await new Promise<void>((resolve) => (this.wake = resolve));
      const p = this.pending;
      if (!p) return;
      this.pending = undefined;
      yield create(OpenAdbStreamRequestSchema, { kind: { case: "data", value: p.chunk } });
      p.done();
    }
  }
}

/** One OpenAdbStream call as a Duplex: reads are the phone's bytes, writes go to it, end() half-closes. */
class TunnelStreamDuplex extends Duplex {
  private reading = false;

  constructor(
    private readonly feed: RequestFeed,
    private readonly responses: AsyncIterator<OpenAdbStreamResponse>,
    private readonly abort: AbortController,
    /** The stream's id in the remote adb benchmark's marks (stage-trace.ts), when tracing. */
    private readonly trace?: string,
  ) {
    super({ allowHalfOpen: true, writableHighWaterMark: WRITE_AHEAD_BYTES, readableHighWaterMark: READ_AHEAD_BYTES });
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.feed.put(chunk, callback);
  }

  override _final(callback: (err?: Error | null) => void): void {
    this.feed.end();
    callback();
  }

  override _read(): void {
    if (!this.reading) void this.pull();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.feed.end();
    this.abort.abort();
    callback(err);
  }

  /** Pushes the phone's bytes until the reader is full; _read resumes it. */
  private async pull(): Promise<void> {
    this.reading = true;
    try {
      for (;;) {
        const r = await this.responses.next();
        // The phone's side ended: said as a message by a coordinator that knows how, else by the call's end.
        if (r.done || r.value.kind.case === "end") {
          if (this.trace) stageTrace?.mark(this.trace, "cli.stream-end");
          this.push(null);
          if (!r.done) void drain(this.responses);
          return;
        }
        if (r.value.kind.case === "data" && !this.push(r.value.kind.value)) return;
      }
    } catch (err) {
      if (!this.destroyed) this.destroy(err as Error);
    } finally {
      this.reading = false;
    }
  }
}

/**
 * Reads a call to its end after the phone's side ended, so it ends as a
 * finished call (its spare is replaced at once) rather than a cancelled
 * one; nothing it says then changes the stream, which has ended.
 */
async function drain(responses: AsyncIterator<OpenAdbStreamResponse>): Promise<void> {
  try {
    while (!(await responses.next()).done);
  } catch {
    /* cut after the end: nothing was lost */
  }
}

/**
 * Opens one adb service on a tunnel's phone: resolves once the phone
 * accepted it (the first response, `opened`); rejects with the farm's or
 * the phone's reason otherwise.
 */
export async function openTunnelStream(calls: TunnelStreamCalls, tunnelId: string, service: string): Promise<Duplex> {
  const abort = new AbortController();
  const feed = new RequestFeed();
  const start = create(OpenAdbStreamRequestSchema, { kind: { case: "start", value: { tunnelId, service } } });
  const responses = calls.start(feed.messages(start), abort.signal)[Symbol.asyncIterator]();
  try {
    const first = await responses.next();
    if (first.done) throw farmError(Errors.TUNNEL_CLOSED, "the coordinator ended the adb stream before opening it");
    const colon = service.indexOf(":");
    const trace = stageTrace ? `adb:${colon < 0 ? service.slice(0, 40) : service.slice(0, colon + 1)}` : undefined;
    const duplex = new TunnelStreamDuplex(feed, responses, abort, trace);
    // Bytes before `opened` are not expected; if they come, they are the stream's.
    if (first.value.kind.case === "data") duplex.push(first.value.kind.value);
    return duplex;
  } catch (err) {
    feed.end();
    abort.abort();
    throw err;
  }
}
