import { HEADER_SIZE, MAX_PAYLOAD, commandName } from "./constants.js";
import { decodeHeader, isMagicValid, type Packet, type PacketHeader } from "./packet.js";

/** A framing violation; adb drops the whole transport on one. */
export class ProtocolError extends Error {
  override name = "ProtocolError";
}

/**
 * Incremental packet parser for a TCP byte stream: accepts chunks of any size
 * (partial headers, several packets per chunk) and returns whole packets.
 * Chunks are kept in a list and joined once per packet, so a 1 MiB payload
 * that arrives in 64 KiB reads is copied once, not sixteen times.
 */
export class PacketParser {
  private chunks: Buffer[] = [];
  /** Index of the first unconsumed chunk. */
  private head = 0;
  private buffered = 0;
  private header: PacketHeader | undefined;

  /** @param maxPayload largest data_length accepted (the negotiated/advertised limit). */
  constructor(public maxPayload: number = MAX_PAYLOAD) {}

  /** Bytes received but not yet returned as part of a packet. */
  get pendingBytes(): number {
    return this.buffered;
  }

  push(chunk: Uint8Array): Packet[] {
    if (chunk.length > 0) {
      this.chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length));
      this.buffered += chunk.length;
    }
    const packets: Packet[] = [];
    for (;;) {
      if (!this.header) {
        if (this.buffered < HEADER_SIZE) break;
        const header = decodeHeader(this.take(HEADER_SIZE));
        if (!isMagicValid(header)) {
          throw new ProtocolError(`bad magic 0x${header.magic.toString(16)} for command ${commandName(header.command)}`);
        }
        if (header.dataLength > this.maxPayload) {
          throw new ProtocolError(`${commandName(header.command)} payload of ${header.dataLength} bytes exceeds max ${this.maxPayload}`);
        }
        this.header = header;
      }
      if (this.buffered < this.header.dataLength) break;
      const { command, arg0, arg1, dataLength } = this.header;
      // Copy the payload out so it never aliases a socket buffer we keep for later packets.
      const payload = dataLength === 0 ? Buffer.alloc(0) : Buffer.from(this.take(dataLength));
      this.header = undefined;
      packets.push({ command, arg0, arg1, payload });
    }
    return packets;
  }

  /** Removes and returns the first n buffered bytes (n <= buffered). */
  private take(n: number): Buffer {
    const first = this.chunks[this.head];
    let out: Buffer;
    if (first && first.length >= n) {
      // Fast path: satisfied by the first chunk alone, no copy.
      out = first.subarray(0, n);
      if (first.length === n) this.head++;
      else this.chunks[this.head] = first.subarray(n);
    } else {
      out = Buffer.allocUnsafe(n);
      let filled = 0;
      while (filled < n) {
        const chunk = this.chunks[this.head];
        if (!chunk) throw new Error("PacketParser.take: buffer underrun");
        const used = Math.min(chunk.length, n - filled);
        chunk.copy(out, filled, 0, used);
        filled += used;
        if (used === chunk.length) this.head++;
        else this.chunks[this.head] = chunk.subarray(used);
      }
    }
    this.buffered -= n;
    // Drop consumed chunks in one go rather than shift() per chunk (O(n^2) for tiny chunks).
    if (this.head === this.chunks.length) {
      this.chunks = [];
      this.head = 0;
    } else if (this.head > 1024) {
      this.chunks = this.chunks.slice(this.head);
      this.head = 0;
    }
    return out;
  }
}
