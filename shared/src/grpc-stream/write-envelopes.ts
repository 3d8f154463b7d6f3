import type { Writable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";

/** One message framed as a gRPC envelope (flags 0 or 1 for compressed), one copy. */
export function envelopeOf(data: Uint8Array, flags = 0): Buffer {
  const out = Buffer.allocUnsafe(data.byteLength + 5);
  out[0] = flags;
  out.writeUInt32BE(data.byteLength, 1);
  out.set(data, 5);
  return out;
}

/**
 * Writes the envelopes of `source` to `sink`, one at a time, waiting for
 * 'drain' whenever the sink's buffer is full: a peer that reads slowly
 * holds this writer (and through it the producer) rather than letting
 * bytes pile up here. A sink closed before the end is a ConnectError.
 */
export async function writeEnvelopes<T>(source: AsyncIterable<T>, sink: Writable, encode: (message: T) => Buffer | Promise<Buffer>): Promise<void> {
  for await (const message of source) {
    const bytes = await encode(message);
    if (sink.destroyed || sink.writableEnded) throw new ConnectError("the stream closed before the message could be sent", Code.Aborted);
    if (!sink.write(bytes)) await drained(sink);
  }
}

/** Resolves on 'drain'; rejects if the sink closes first. */
export function drained(sink: Writable): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onDrain = () => {
      sink.off("close", onClose);
      resolve();
    };
    const onClose = () => {
      sink.off("drain", onDrain);
      reject(new ConnectError("the stream closed while a message waited to be sent", Code.Aborted));
    };
    sink.once("drain", onDrain);
    sink.once("close", onClose);
  });
}
