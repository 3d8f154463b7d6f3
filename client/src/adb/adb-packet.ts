/**
 * adb's transport framing (AOSP adb/protocol.txt): a 24-byte header of six
 * little-endian uint32 (command, arg0, arg1, data length, data checksum,
 * magic = command ^ 0xffffffff), then the payload.
 */

export const A_CNXN = 0x4e584e43;
export const A_AUTH = 0x48545541;
export const A_OPEN = 0x4e45504f;
export const A_OKAY = 0x59414b4f;
export const A_WRTE = 0x45545257;
export const A_CLSE = 0x45534c43;

/** Protocol version with checksums; the one after it (current adb) skips them. */
export const A_VERSION_MIN = 0x01000000;
export const A_VERSION_SKIP_CHECKSUM = 0x01000001;
/** What current adbd advertises and the most the host sends in one WRTE. */
export const MAX_PAYLOAD = 1024 * 1024;
/** CNXN and AUTH payloads must fit the oldest hosts' limit. */
export const MAX_PAYLOAD_V1 = 4096;

const HEADER_BYTES = 24;

export interface AdbPacket {
  command: number;
  arg0: number;
  arg1: number;
  payload: Buffer;
}

export class AdbProtocolError extends Error {
  override name = "AdbProtocolError";
}

/** Unsigned byte sum: what hosts before protocol 0x01000001 verify. */
function checksum(payload: Uint8Array): number {
  let sum = 0;
  for (const b of payload) sum = (sum + b) >>> 0;
  return sum;
}

/** One packet on the wire; `withChecksum` for a peer that negotiated the old version. */
export function encodePacket(command: number, arg0: number, arg1: number, payload: Uint8Array = Buffer.alloc(0), withChecksum = false): Buffer {
  const out = Buffer.allocUnsafe(HEADER_BYTES + payload.length);
  out.writeUInt32LE(command >>> 0, 0);
  out.writeUInt32LE(arg0 >>> 0, 4);
  out.writeUInt32LE(arg1 >>> 0, 8);
  out.writeUInt32LE(payload.length, 12);
  out.writeUInt32LE(withChecksum ? checksum(payload) : 0, 16);
  out.writeUInt32LE((command ^ 0xffffffff) >>> 0, 20);
  out.set(payload, HEADER_BYTES);
  return out;
}

/** The name of a command, for logs ("WRTE"). */
export function commandName(command: number): string {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(command >>> 0);
  return /^[A-Z]{4}$/.test(b.toString("latin1")) ? b.toString("latin1") : `0x${command.toString(16)}`;
}

/**
 * Splits a byte stream into packets. Bytes are kept as the chunks they
 * arrived in and joined only once a whole packet is there, so a 1 MiB WRTE
 * arriving in 64 KiB reads is copied once, not sixteen times.
 */
export class PacketParser {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private header: { command: number; arg0: number; arg1: number; length: number } | undefined;

  constructor(private readonly maxPayload: number = MAX_PAYLOAD) {}

  /** Feeds bytes; returns every packet they complete. Throws AdbProtocolError on a bad header. */
  push(data: Buffer): AdbPacket[] {
    this.chunks.push(data);
    this.buffered += data.length;
    const packets: AdbPacket[] = [];
    for (;;) {
      if (!this.header) {
        if (this.buffered < HEADER_BYTES) break;
        const h = this.take(HEADER_BYTES);
        const command = h.readUInt32LE(0);
        const length = h.readUInt32LE(12);
        if (h.readUInt32LE(20) !== (command ^ 0xffffffff) >>> 0) throw new AdbProtocolError(`bad packet magic for command 0x${command.toString(16)}`);
        // adb drops a transport on an oversized packet too.
        if (length > this.maxPayload) throw new AdbProtocolError(`packet of ${length} bytes exceeds ${this.maxPayload}`);
        this.header = { command, arg0: h.readUInt32LE(4), arg1: h.readUInt32LE(8), length };
      }
      if (this.buffered < this.header.length) break;
      const { command, arg0, arg1, length } = this.header;
      this.header = undefined;
      packets.push({ command, arg0, arg1, payload: length === 0 ? Buffer.alloc(0) : this.take(length) });
    }
    return packets;
  }

  private take(n: number): Buffer {
    const first = this.chunks[0] as Buffer;
    let out: Buffer;
    if (first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
    } else {
      out = Buffer.allocUnsafe(n);
      let filled = 0;
      while (filled < n) {
        const c = this.chunks[0] as Buffer;
        const k = Math.min(c.length, n - filled);
        c.copy(out, filled, 0, k);
        filled += k;
        if (k === c.length) this.chunks.shift();
        else this.chunks[0] = c.subarray(k);
      }
    }
    this.buffered -= n;
    return out;
  }
}
