import { describe, expect, it } from "vitest";
import { A_CNXN, A_WRTE, AdbProtocolError, PacketParser, commandName, encodePacket } from "./adb-packet.js";

describe("adb packets", () => {
  it("round-trips packets however the bytes are cut", () => {
    const payload = Buffer.from("x".repeat(70_000));
    const wire = Buffer.concat([encodePacket(A_CNXN, 0x01000001, 0x100000, Buffer.from("host::features=shell_v2")), encodePacket(A_WRTE, 5, 9, payload), encodePacket(A_WRTE, 5, 9)]);
    for (const step of [1, 7, 24, 4096, wire.length]) {
      const parser = new PacketParser();
      const got = [];
      for (let i = 0; i < wire.length; i += step) got.push(...parser.push(wire.subarray(i, i + step)));
      expect(got.map((p) => [commandName(p.command), p.arg0, p.arg1, p.payload.length])).toEqual([["CNXN", 0x01000001, 0x100000, 23], ["WRTE", 5, 9, 70_000], ["WRTE", 5, 9, 0]]);
      expect(got[1]!.payload.equals(payload)).toBe(true);
    }
  });

  it("fills the checksum only for hosts of the old protocol version", () => {
    expect(encodePacket(A_WRTE, 1, 2, Buffer.from([1, 2, 250])).readUInt32LE(16)).toBe(0);
    expect(encodePacket(A_WRTE, 1, 2, Buffer.from([1, 2, 250]), true).readUInt32LE(16)).toBe(253);
  });

  it("refuses a bad magic and an oversized payload, as adb drops such a transport", () => {
    const bad = encodePacket(A_WRTE, 1, 2);
    bad.writeUInt32LE(0, 20);
    expect(() => new PacketParser().push(bad)).toThrow(AdbProtocolError);
    expect(() => new PacketParser(1024).push(encodePacket(A_WRTE, 1, 2, Buffer.alloc(1025)))).toThrow(/exceeds 1024/);
  });
});
