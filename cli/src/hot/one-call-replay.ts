import { EventEmitter } from "node:events";
import { constants } from "node:http2";
import type { DescMessage, DescMethodUnary, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import { DEADLINE_GRACE_MS } from "@farm/shared/deadline";
import { gaveUp } from "@farm/shared/farm-transport";
import { grpcUnary } from "@farm/shared/grpc-unary/grpc-unary-transport";
import type { ClientConfig } from "@farm/client/config";
import { clientInterceptors, requestId } from "@farm/client/transport";
import type { CallEvent, OneCallOutcome } from "./one-call.js";

/**
 * An answer the hot commands' own reader did not take (an error status, a
 * reset, a compressed or unusual message, the local deadline, a stop
 * signal), judged by the code every other call runs: the recorded events
 * are played into farm's gRPC unary client (shared/src/grpc-unary) through
 * the CLI's interceptors (client/src/transport.ts) and the transport's
 * deadline rule (farmTransport's gaveUp), so the message, or the error with
 * its code, text, field and outcome, is the one `farm` always gave for that
 * answer. Loaded only then: it brings Connect and protobuf-es.
 */
export async function replayCall<I extends DescMessage, O extends DescMessage>(
  outcome: Extract<OneCallOutcome, { sent: true }>,
  call: {
    method: DescMethodUnary<I, O>;
    input: MessageInitShape<I>;
    config: ClientConfig & { verbose?: boolean };
    /** The call's timeout as the command gave it (sent on the wire; the wait was DEADLINE_GRACE_MS longer). */
    timeoutMs: number;
    /** The x-request-id the call was sent with, and when it started (performance.now()), for --verbose. */
    requestId: string;
    started: number;
    origin: string;
  },
): Promise<MessageShape<O>> {
  // The run's stop, replayed: aborted once the request is "sent", as the real one came during the call.
  const stop = new AbortController();
  const stream = new ReplayStream(outcome, () => stop.abort());
  const sessions = { request: () => Promise.resolve(stream), notifyResponseByteRead: () => undefined } as unknown as Http2SessionManager;
  const writeErr = call.config.writeErr ?? ((s: string) => void process.stderr.write(s));
  // What the CLI's requestId interceptor prints with --verbose, with the real call's id and time.
  const verbose = requestId(call.config.verbose ?? false, writeErr, { id: call.requestId, started: call.started });
  const interceptors = [verbose, ...clientInterceptors({ ...call.config, verbose: false, stopSignal: stop.signal })];
  const unary = grpcUnary({ baseUrl: call.origin, sessions, interceptors });
  try {
    // The local deadline, replayed: it fires at once, as the real one did.
    const res = await unary(call.method, undefined, outcome.timedOut ? 1 : undefined, { "x-request-id": call.requestId }, call.input);
    return res.message;
  } catch (err) {
    throw gaveUp(err, call.method, call.input, call.timeoutMs, DEADLINE_GRACE_MS);
  }
}

/** The recorded stream, played back to grpc-unary-transport.ts's reader once its request is written. */
class ReplayStream extends EventEmitter {
  closed = false;
  rstCode: number | undefined = undefined;
  readableLength = 0;

  constructor(private readonly outcome: Extract<OneCallOutcome, { sent: true }>, private readonly onStopped: () => void) {
    super();
  }

  close(code?: number): void {
    if (this.closed) return;
    this.closed = true;
    this.rstCode = code;
  }

  end(): void {
    setImmediate(() => this.play());
  }

  private play(): void {
    // A stop or the deadline ended the real call: the replay ends it the same way and plays nothing (the reader has settled by then).
    if (this.outcome.stopped) return this.onStopped();
    if (this.outcome.timedOut) return;
    const events: CallEvent[] = this.outcome.tooLarge ? [...this.outcome.events, { kind: "close", rstCode: constants.NGHTTP2_CANCEL }] : this.outcome.events;
    for (const e of events) {
      if (this.closed && e.kind !== "close") continue;
      switch (e.kind) {
        case "response":
          this.emit("response", e.headers);
          break;
        case "data":
          this.emit("data", e.chunk);
          break;
        case "trailers":
          this.emit("trailers", e.headers);
          break;
        case "end":
          this.emit("end");
          break;
        case "error":
          this.emit("error", e.error);
          break;
        case "close":
          this.closed = true;
          this.rstCode ??= e.rstCode;
          this.emit("close");
          break;
      }
    }
  }
}
