import { Code, ConnectError } from "@connectrpc/connect";

/** The gRPC length-prefixed message: one flags byte, a 4-byte big-endian length, the bytes. */
export const ENVELOPE_HEADER_BYTES = 5;
const FLAG_COMPRESSED = 0x01;

/** One request message, framed. */
export function encodeEnvelope(data: Uint8Array): Uint8Array {
  const bytes = Buffer.allocUnsafe(data.length + ENVELOPE_HEADER_BYTES);
  bytes[0] = 0;
  bytes.writeUInt32BE(data.length, 1);
  bytes.set(data, ENVELOPE_HEADER_BYTES);
  return bytes;
}

/**
 * Collects the one message of a unary response from DATA chunks of any
 * size. The length prefix is judged as soon as its 5 bytes are in, so a
 * message over `maxBytes` is refused before its body is held; a compressed
 * message (this client never offers an encoding) and a second message are
 * refused as protocol errors. Every refusal is a ConnectError.
 */
export class UnaryEnvelopeReader {
  private readonly chunks: Buffer[] = [];
  private received = 0;
  /** The message's length once its prefix is in. */
  private length: number | undefined;

  constructor(private readonly maxBytes: number) {}

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.received += chunk.length;
    if (this.length === undefined && this.received >= ENVELOPE_HEADER_BYTES) this.readPrefix();
    if (this.length !== undefined && this.received > ENVELOPE_HEADER_BYTES + this.length) {
      throw new ConnectError("protocol error: received extra output message for unary method", Code.Unimplemented);
    }
  }

  /** The message's bytes; undefined when the response carried none (trailers only). */
  finish(): Uint8Array | undefined {
    if (this.received === 0) return undefined;
    const expected = this.length === undefined ? undefined : ENVELOPE_HEADER_BYTES + this.length;
    if (expected === undefined || this.received < expected) {
      throw new ConnectError(`protocol error: the response ended inside a message (${this.received} of ${expected ?? "at least 5"} bytes)`, Code.Internal);
    }
    const all = this.chunks.length === 1 ? this.chunks[0] as Buffer : Buffer.concat(this.chunks, this.received);
    return all.subarray(ENVELOPE_HEADER_BYTES);
  }

  private readPrefix(): void {
    const head = this.chunks.length === 1 || (this.chunks[0] as Buffer).length >= ENVELOPE_HEADER_BYTES ? this.chunks[0] as Buffer : Buffer.concat(this.chunks, this.received);
    const flags = head[0] as number;
    const length = head.readUInt32BE(1);
    if ((flags & FLAG_COMPRESSED) !== 0) {
      throw new ConnectError("protocol error: the server sent a compressed message, but this client accepts none (grpc-accept-encoding is not sent)", Code.Internal);
    }
    if (flags !== 0) throw new ConnectError(`protocol error: unexpected message flags 0x${flags.toString(16)}`, Code.Internal);
    if (length > this.maxBytes) {
      throw new ConnectError(`message size ${length} is larger than configured readMaxBytes ${this.maxBytes}`, Code.ResourceExhausted);
    }
    this.length = length;
  }
}
