import { describe, expect, it } from "vitest";
import { encodeDent, encodeDnt2, encodeListDone, encodeStatV1, encodeStatV2, syncFail } from "./sync-protocol.js";

const stat = { mode: 0o100644, size: 5, uid: 2000, gid: 2000, mtime: 1_700_000_000, ino: 42, nlink: 1 };

describe("sync protocol encoding (file_sync_protocol.h layouts)", () => {
  it("STAT v1: id, mode, size, mtime; zeros when missing", () => {
    const out = encodeStatV1(stat);
    expect(out.length).toBe(16);
    expect(out.toString("latin1", 0, 4)).toBe("STAT");
    expect([out.readUInt32LE(4), out.readUInt32LE(8), out.readUInt32LE(12)]).toEqual([0o100644, 5, 1_700_000_000]);
    expect(encodeStatV1(undefined).subarray(4).equals(Buffer.alloc(12))).toBe(true);
  });

  it("STA2/LST2: echoed id + 68-byte body (72 bytes), errno first", () => {
    const out = encodeStatV2("LST2", stat, 0);
    expect(out.length).toBe(72);
    expect(out.toString("latin1", 0, 4)).toBe("LST2");
    expect(out.readUInt32LE(4)).toBe(0);
    expect(out.readBigUInt64LE(16)).toBe(42n);
    expect(out.readUInt32LE(24)).toBe(0o100644);
    expect(out.readUInt32LE(28)).toBe(1);
    expect([out.readUInt32LE(32), out.readUInt32LE(36)]).toEqual([2000, 2000]);
    expect(out.readBigUInt64LE(40)).toBe(5n);
    expect(out.readBigInt64LE(56)).toBe(1_700_000_000n);
    expect(encodeStatV2("STA2", undefined, 2).readUInt32LE(4)).toBe(2);
  });

  it("DENT, DNT2 and DONE sizes", () => {
    expect(encodeDent("ab", stat).length).toBe(20 + 2);
    const dnt2 = encodeDnt2("abc", stat);
    expect(dnt2.length).toBe(76 + 3);
    expect(dnt2.readUInt32LE(72)).toBe(3);
    expect(encodeListDone(false).length).toBe(20);
    expect(encodeListDone(true).length).toBe(76);
    expect(syncFail("nope").toString("latin1")).toBe("FAIL\x04\x00\x00\x00nope");
  });
});
