import { HEADER_SIZE, VERSION_MIN } from "./constants.js";

/** One adb transport packet: header fields plus payload. */
export interface Packet {
  command: number;
  arg0: number;
  arg1: number;
  payload: Buffer;
}

export interface PacketHeader {
  command: number;
  arg0: number;
  arg1: number;
  dataLength: number;
  dataCheck: number;
  magic: number;
}

/** Unsigned 32-bit byte sum of the payload (adb's "checksum"). */
export function checksum(payload: Uint8Array): number {
  let sum = 0;
  for (const byte of payload) sum += byte;
  return sum >>> 0;
}

/**
 * Serialises a packet. The checksum is filled only for protocol version
 * 0x01000000; newer peers expect 0 there and nobody verifies it.
 */
export function encodePacket(packet: Packet, version: number = VERSION_MIN): Buffer {
  const out = Buffer.allocUnsafe(HEADER_SIZE + packet.payload.length);
  out.writeUInt32LE(packet.command >>> 0, 0);
  out.writeUInt32LE(packet.arg0 >>> 0, 4);
  out.writeUInt32LE(packet.arg1 >>> 0, 8);
  out.writeUInt32LE(packet.payload.length, 12);
  out.writeUInt32LE(version <= VERSION_MIN ? checksum(packet.payload) : 0, 16);
  out.writeUInt32LE((packet.command ^ 0xffffffff) >>> 0, 20);
  packet.payload.copy(out, HEADER_SIZE);
  return out;
}

/**
 * Just the 24-byte header for a payload given in parts, so large payloads
 * can be written without being copied together.
 */
export function encodeHeader(command: number, arg0: number, arg1: number, parts: readonly Uint8Array[], version: number = VERSION_MIN): Buffer {
  const out = Buffer.allocUnsafe(HEADER_SIZE);
  const length = parts.reduce((sum, part) => sum + part.length, 0);
  out.writeUInt32LE(command >>> 0, 0);
  out.writeUInt32LE(arg0 >>> 0, 4);
  out.writeUInt32LE(arg1 >>> 0, 8);
  out.writeUInt32LE(length, 12);
  out.writeUInt32LE(version <= VERSION_MIN ? parts.reduce((sum, part) => (sum + checksum(part)) >>> 0, 0) : 0, 16);
  out.writeUInt32LE((command ^ 0xffffffff) >>> 0, 20);
  return out;
}

export function decodeHeader(bytes: Uint8Array): PacketHeader {
  if (bytes.length < HEADER_SIZE) throw new RangeError(`adb header needs ${HEADER_SIZE} bytes, got ${bytes.length}`);
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, HEADER_SIZE);
  return {
    command: view.readUInt32LE(0),
    arg0: view.readUInt32LE(4),
    arg1: view.readUInt32LE(8),
    dataLength: view.readUInt32LE(12),
    dataCheck: view.readUInt32LE(16),
    magic: view.readUInt32LE(20),
  };
}

export function isMagicValid(header: PacketHeader): boolean {
  return ((header.command ^ 0xffffffff) >>> 0) === header.magic;
}
