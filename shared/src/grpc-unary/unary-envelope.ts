import { promisify } from "node:util";
import { gunzip } from "node:zlib";
import { Code, ConnectError } from "@connectrpc/connect";

const gunzipAsync = promisify(gunzip);

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
 * message over `maxBytes` is refused before its body is held, and a
 * gzipped one may not inflate past it either; a second message is refused
 * as a protocol error. Every refusal is a ConnectError.
 */
export class UnaryEnvelopeReader {
  private readonly chunks: Buffer[] = [];
  private received = 0;
  /** The message's length once its prefix is in. */
  private length: number | undefined;
  /** Whether its flags say it is compressed (with the response's grpc-encoding). */
  private compressed = false;

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

  /**
   * The message's bytes, inflated when the server compressed it: only gzip,
   * which is all this client offers (grpc-accept-encoding), and never past
   * `maxBytes` inflated.
   */
  async decoded(encoding: string | null): Promise<Uint8Array | undefined> {
    const bytes = this.finish();
    if (bytes === undefined || !this.compressed) return bytes;
    if (encoding !== "gzip") {
      throw new ConnectError(`protocol error: the server sent a compressed message with encoding ${JSON.stringify(encoding ?? "")}, but this client accepts only gzip`, Code.Internal);
    }
    try {
      return await gunzipAsync(bytes, { maxOutputLength: this.maxBytes });
    } catch (err) {
      if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") {
        throw new ConnectError(`message is larger than configured readMaxBytes ${this.maxBytes} after decompression`, Code.ResourceExhausted);
      }
      throw new ConnectError(`protocol error: the gzipped message could not be inflated: ${(err as Error).message}`, Code.Internal);
    }
  }

  private readPrefix(): void {
    const head = this.chunks.length === 1 || (this.chunks[0] as Buffer).length >= ENVELOPE_HEADER_BYTES ? this.chunks[0] as Buffer : Buffer.concat(this.chunks, this.received);
    const flags = head[0] as number;
    const length = head.readUInt32BE(1);
    this.compressed = (flags & FLAG_COMPRESSED) !== 0;
    if ((flags & ~FLAG_COMPRESSED) !== 0) throw new ConnectError(`protocol error: unexpected message flags 0x${flags.toString(16)}`, Code.Internal);
    if (length > this.maxBytes) {
      throw new ConnectError(`message size ${length} is larger than configured readMaxBytes ${this.maxBytes}`, Code.ResourceExhausted);
    }
    this.length = length;
  }
}
