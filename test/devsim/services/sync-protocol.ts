import type { StatInfo } from "../fs/file-system.js";

/** Sync request/response ids (file_sync_protocol.h), four ASCII bytes. */
export const SyncId = {
  STAT: "STAT",
  STA2: "STA2",
  LST2: "LST2",
  LIST: "LIST",
  LIS2: "LIS2",
  DENT: "DENT",
  DNT2: "DNT2",
  RECV: "RECV",
  SEND: "SEND",
  DATA: "DATA",
  DONE: "DONE",
  OKAY: "OKAY",
  FAIL: "FAIL",
  QUIT: "QUIT",
} as const;

/** Largest DATA payload adbd 29 sends (a DATA packet then fits 64 KiB). */
export const SYNC_DATA_MAX_SEND = 65_528;
/** Largest DATA payload accepted from the host. */
export const SYNC_DATA_MAX = 64 * 1024;
/** Paths longer than this are refused (adbd: 1024). */
export const SYNC_PATH_MAX = 1024;

/** id + u32 (length or argument). */
export function syncHeader(id: string, value: number): Buffer {
  const out = Buffer.allocUnsafe(8);
  out.write(id, 0, "latin1");
  out.writeUInt32LE(value >>> 0, 4);
  return out;
}

/** `FAIL` + length + message. */
export function syncFail(message: string): Buffer {
  const text = Buffer.from(message);
  return Buffer.concat([syncHeader(SyncId.FAIL, text.length), text]);
}

/** v1 STAT reply: mode, size, mtime (u32 each); zeros when the path is missing. */
export function encodeStatV1(stat: StatInfo | undefined): Buffer {
  const out = Buffer.alloc(16);
  out.write(SyncId.STAT, 0, "latin1");
  if (stat) {
    out.writeUInt32LE(stat.mode >>> 0, 4);
    out.writeUInt32LE(Math.min(stat.size, 0xffffffff), 8);
    out.writeUInt32LE(stat.mtime >>> 0, 12);
  }
  return out;
}

/**
 * The 72-byte v2 stat body after the id: error, dev, ino, mode, nlink, uid,
 * gid, size, atime, mtime, ctime.
 */
export function encodeStatV2Body(stat: StatInfo | undefined, errno: number): Buffer {
  const out = Buffer.alloc(68);
  out.writeUInt32LE(errno, 0);
  if (stat && errno === 0) {
    out.writeBigUInt64LE(0xfd00n, 4);
    out.writeBigUInt64LE(BigInt(stat.ino), 12);
    out.writeUInt32LE(stat.mode >>> 0, 20);
    out.writeUInt32LE(stat.nlink, 24);
    out.writeUInt32LE(stat.uid, 28);
    out.writeUInt32LE(stat.gid, 32);
    out.writeBigUInt64LE(BigInt(stat.size), 36);
    out.writeBigInt64LE(BigInt(stat.mtime), 44);
    out.writeBigInt64LE(BigInt(stat.mtime), 52);
    out.writeBigInt64LE(BigInt(stat.mtime), 60);
  }
  return out;
}

/** STA2/LST2 reply: the request id echoed, then the stat body. */
export function encodeStatV2(id: string, stat: StatInfo | undefined, errno: number): Buffer {
  const head = Buffer.alloc(4);
  head.write(id, 0, "latin1");
  return Buffer.concat([head, encodeStatV2Body(stat, errno)]);
}

/** LIST entry: DENT mode size mtime namelen name. */
export function encodeDent(name: string, stat: StatInfo): Buffer {
  const nameBytes = Buffer.from(name);
  const out = Buffer.alloc(20);
  out.write(SyncId.DENT, 0, "latin1");
  out.writeUInt32LE(stat.mode >>> 0, 4);
  out.writeUInt32LE(Math.min(stat.size, 0xffffffff), 8);
  out.writeUInt32LE(stat.mtime >>> 0, 12);
  out.writeUInt32LE(nameBytes.length, 16);
  return Buffer.concat([out, nameBytes]);
}

/** LIS2 entry: DNT2 + v2 stat body + namelen + name. */
export function encodeDnt2(name: string, stat: StatInfo): Buffer {
  const nameBytes = Buffer.from(name);
  const len = Buffer.alloc(4);
  len.writeUInt32LE(nameBytes.length, 0);
  return Buffer.concat([Buffer.from(SyncId.DNT2, "latin1"), encodeStatV2Body(stat, 0), len, nameBytes]);
}

/** End of a LIST (20 bytes) or LIS2 (76 bytes) listing. */
export function encodeListDone(v2: boolean): Buffer {
  const out = Buffer.alloc(v2 ? 76 : 20);
  out.write(SyncId.DONE, 0, "latin1");
  return out;
}
