import { create } from "@bufbuild/protobuf";
import { AsyncQueue } from "@farm/shared/async-queue";
import { ServeAdbStreamResponseSchema, type ServeAdbStreamRequest, type ServeAdbStreamResponse } from "@farm/shared/gen/farm/v1/agent_adb_service_pb";
import type { ServeAdbStream } from "./adb-stream.js";

/** One ServeAdbStream call as the fake coordinator sees it. */
export interface FakeAdbStreamCall {
  requests: AsyncIterator<ServeAdbStreamRequest>;
  signal: AbortSignal;
  /** Sends bytes to the device. */
  send(bytes: Uint8Array): void;
  /** Ends the response stream (the caller closed its adb stream). */
  end(): void;
  /** Fails the response stream (the coordinator went away). */
  fail(err: Error): void;
  /** Called each time the relay asks for the next response. */
  onPull: () => void;
}

/**
 * For tests: stands in for the coordinator's AgentAdbService.ServeAdbStream
 * (the coordinator's side is its own work): each call is handed to the
 * test, which reads the requests and feeds the responses. An aborted call
 * fails its response stream as Connect does.
 */
export function fakeServeAdbStream(): { serve: ServeAdbStream; nextCall(): Promise<FakeAdbStreamCall> } {
  const calls = new AsyncQueue<FakeAdbStreamCall>();
  const pending = calls[Symbol.asyncIterator]();
  const serve: ServeAdbStream = (requests, signal) => {
    const responses = new AsyncQueue<ServeAdbStreamResponse>();
    let failWith!: (err: Error) => void;
    const failed = new Promise<never>((_, reject) => (failWith = reject));
    const aborted = new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(new Error("the call was cancelled")), { once: true }));
    void failed.catch(() => undefined);
    void aborted.catch(() => undefined);
    const call: FakeAdbStreamCall = {
      requests: requests[Symbol.asyncIterator](),
      signal,
      send: (bytes) => responses.push(create(ServeAdbStreamResponseSchema, { kind: { case: "data", value: bytes } })),
      end: () => responses.close(),
      fail: (err) => failWith(err),
      onPull: () => undefined,
    };
    calls.push(call);
    return (async function* () {
      const it = responses[Symbol.asyncIterator]();
      for (;;) {
        call.onPull();
        const r = await Promise.race([it.next(), failed, aborted]);
        if (r.done) return;
        yield r.value;
      }
    })();
  };
  return {
    serve,
    nextCall: async () => {
      const r = await pending.next();
      if (r.done) throw new Error("no more calls");
      return r.value;
    },
  };
}

/** Reads data requests until `bytes` have arrived or the request stream ends. */
export async function readData(requests: AsyncIterator<ServeAdbStreamRequest>, bytes = Infinity): Promise<{ data: Buffer; ended: boolean }> {
  const parts: Buffer[] = [];
  let n = 0;
  while (n < bytes) {
    const r = await requests.next();
    if (r.done) return { data: Buffer.concat(parts), ended: true };
    if (r.value.kind.case !== "data") throw new Error(`unexpected request ${r.value.kind.case ?? "empty"}`);
    parts.push(Buffer.from(r.value.kind.value));
    n += r.value.kind.value.length;
  }
  return { data: Buffer.concat(parts), ended: false };
}
