import type { Readable } from "node:stream";
import { fromBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Reads the one message of a unary gRPC request from its body with the
 * method's cap applied to each envelope's announced length, before its
 * bytes are buffered. The failures, and their order, are Connect's for the
 * same bytes (protocol/envelope.ts, invoke-implementation.ts): a chunk's
 * envelopes are split first (an announced length over the cap fails
 * there), then each is checked for compression and parsed; a second
 * message, a body cut inside an envelope or one with none fail at the end.
 * Compressed requests never come here (the fast path leaves them to Connect).
 */
export function readUnaryMessage<I extends DescMessage>(body: Readable, input: I, readMaxBytes: number): Promise<MessageShape<I>> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let buffered = 0;
    // The envelope whose header is read, waiting for its bytes.
    let pending: { flags: number; length: number } | undefined;
    let message: MessageShape<I> | undefined;
    let settled = false;
    const finish = (err: unknown, value?: MessageShape<I>) => {
      if (settled) return;
      settled = true;
      body.off("data", onData);
      body.off("end", onEnd);
      body.off("close", onClose);
      body.off("error", onError);
      if (err !== undefined) {
        // Nothing more is read: the rest stays unread (the request gate resets a client still sending).
        body.pause();
        reject(err);
      } else resolve(value as MessageShape<I>);
    };
    const take = (n: number): Buffer => {
      const first = chunks[0] as Buffer;
      if (first.length >= n) {
        const out = first.subarray(0, n);
        if (first.length === n) chunks.shift();
        else chunks[0] = first.subarray(n);
        buffered -= n;
        return out;
      }
      const out = Buffer.allocUnsafe(n);
      let at = 0;
      while (at < n) {
        const c = chunks[0] as Buffer;
        const use = Math.min(c.length, n - at);
        c.copy(out, at, 0, use);
        at += use;
        if (use === c.length) chunks.shift();
        else chunks[0] = c.subarray(use);
      }
      buffered -= n;
      return out;
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      buffered += chunk.length;
      try {
        // Split every envelope this chunk completes (the caps are checked here) ...
        const envelopes: { flags: number; data: Buffer }[] = [];
        for (;;) {
          if (!pending) {
            if (buffered < 5) break;
            const head = take(5);
            const length = head.readUInt32BE(1);
            if (length > readMaxBytes) throw new ConnectError(`message size ${length} is larger than configured readMaxBytes ${readMaxBytes}`, Code.ResourceExhausted);
            pending = { flags: head[0] as number, length };
          }
          if (buffered < pending.length) break;
          envelopes.push({ flags: pending.flags, data: pending.length === 0 ? Buffer.alloc(0) : take(pending.length) });
          pending = undefined;
        }
        // ... then read them in order.
        for (const env of envelopes) {
          if ((env.flags & 1) === 1) throw new ConnectError("received compressed envelope, but do not know how to decompress", Code.Internal);
          const parsed = parse(input, env.data);
          if (message !== undefined) throw new ConnectError("protocol error: received extra input message for unary method", Code.Unimplemented);
          message = parsed;
        }
      } catch (err) {
        finish(err);
      }
    };
    const onEnd = () => {
      // Connect counts what is buffered after a consumed header: a header with none of its bytes is "missing", not "incomplete".
      if (buffered > 0) return finish(new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument));
      if (message === undefined) return finish(new ConnectError("protocol error: missing input message for unary method", Code.Unimplemented));
      finish(undefined, message);
    };
    const onClose = () => finish(new ConnectError("the caller ended the call before its request was read", Code.Canceled));
    const onError = (err: Error) => finish(new ConnectError(`the request could not be read: ${err.message}`, Code.Canceled));
    body.on("data", onData);
    body.once("end", onEnd);
    body.once("close", onClose);
    body.once("error", onError);
  });
}

function parse<I extends DescMessage>(input: I, data: Uint8Array): MessageShape<I> {
  try {
    return fromBinary(input, data);
  } catch (e) {
    throw new ConnectError(`parse binary: ${e instanceof Error ? e.message : String(e)}`, Code.Internal);
  }
}
