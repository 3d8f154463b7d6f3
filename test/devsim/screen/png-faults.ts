import type { PngFault } from "../faults/fault-settings.js";

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) crc = CRC_TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** Finds a chunk by type; returns the offset of its length field. */
function findChunk(png: Buffer, type: string): number {
  for (let offset = 8; offset + 8 <= png.length;) {
    const length = png.readUInt32BE(offset);
    if (png.toString("latin1", offset + 4, offset + 8) === type) return offset;
    offset += 12 + length;
  }
  return -1;
}

/**
 * Damages a good PNG the ways broken screenshots arrive in real labs:
 * `corrupt` scrambles compressed pixel data (valid header, decode fails),
 * `truncated` cuts the file short, `lying-header` keeps a consistent IHDR
 * (CRC fixed) that claims dimensions twice the real ones.
 */
export function damagePng(png: Buffer, fault: PngFault): Buffer {
  const out = Buffer.from(png);
  if (fault === "truncated") return out.subarray(0, Math.floor(out.length * 0.6));
  if (fault === "corrupt") {
    const idat = findChunk(out, "IDAT");
    const length = idat >= 0 ? out.readUInt32BE(idat) : 0;
    const start = idat + 8 + Math.floor(length / 4);
    for (let index = start; index < start + Math.max(16, Math.floor(length / 4)) && index < idat + 8 + length; index++) out[index] = out[index]! ^ 0x5a;
    return out;
  }
  const ihdr = findChunk(out, "IHDR");
  out.writeUInt32BE(out.readUInt32BE(ihdr + 8) * 2, ihdr + 8);
  out.writeUInt32BE(out.readUInt32BE(ihdr + 12) * 2, ihdr + 12);
  out.writeUInt32BE(crc32(out.subarray(ihdr + 4, ihdr + 8 + 13)), ihdr + 8 + 13);
  return out;
}
