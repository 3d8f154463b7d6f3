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
 * Writes one envelope given whole or in parts (bytes-envelope.ts: a head,
 * then a payload written as it is, not copied); parts go out in one corked
 * writev. Returns what the last write returned: false when the sink is full.
 */
export function writeEnvelope(sink: Writable, bytes: Buffer | Buffer[]): boolean {
  if (!Array.isArray(bytes)) return sink.write(bytes);
  if (bytes.length === 1) return sink.write(bytes[0] as Buffer);
  sink.cork();
  let ok = true;
  for (const b of bytes) ok = sink.write(b);
  sink.uncork();
  return ok;
}

/**
 * Writes the envelopes of `source` to `sink`, one at a time, waiting for
 * 'drain' whenever the sink's buffer is full: a peer that reads slowly
 * holds this writer (and through it the producer) rather than letting
 * bytes pile up here. A sink closed before the end is a ConnectError.
 */
export async function writeEnvelopes<T>(source: AsyncIterable<T>, sink: Writable, encode: (message: T) => Buffer | Buffer[] | Promise<Buffer | Buffer[]>): Promise<void> {
  for await (const message of source) {
    const bytes = await encode(message);
    if (sink.destroyed || sink.writableEnded) throw new ConnectError("the stream closed before the message could be sent", Code.Aborted);
    if (!writeEnvelope(sink, bytes)) await drained(sink);
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
