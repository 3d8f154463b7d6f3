import { describe, expect, it } from "vitest";
import { formatBanner, parseBanner } from "./protocol/banner.js";
import { Command, HEADER_SIZE, VERSION_MIN, VERSION_SKIP_CHECKSUM, commandName } from "./protocol/constants.js";
import { PacketParser, ProtocolError } from "./protocol/packet-parser.js";
import { checksum, decodeHeader, encodePacket, isMagicValid, type Packet } from "./protocol/packet.js";
import { ShellPacketId, ShellPacketParser, encodeExitPacket, encodeShellPacket, parseWindowSize } from "./services/shell-v2-packet.js";

const open: Packet = { command: Command.OPEN, arg0: 7, arg1: 0, payload: Buffer.from("shell:getprop\0") };

describe("packet header codec", () => {
  it("lays out six little-endian uint32 fields and the payload", () => {
    const bytes = encodePacket(open, VERSION_MIN);
    expect(bytes.length).toBe(HEADER_SIZE + open.payload.length);
    expect(bytes.subarray(0, 4).toString("ascii")).toBe("OPEN");
    const header = decodeHeader(bytes);
    expect(header).toEqual({
      command: Command.OPEN,
      arg0: 7,
      arg1: 0,
      dataLength: open.payload.length,
      dataCheck: checksum(open.payload),
      magic: (Command.OPEN ^ 0xffffffff) >>> 0,
    });
    expect(isMagicValid(header)).toBe(true);
    expect(bytes.subarray(HEADER_SIZE).equals(open.payload)).toBe(true);
  });

  it("fills the checksum only for protocol version 0x01000000", () => {
    expect(checksum(Buffer.from([1, 2, 255]))).toBe(258);
    expect(decodeHeader(encodePacket(open, VERSION_MIN)).dataCheck).toBe(checksum(open.payload));
    expect(decodeHeader(encodePacket(open, VERSION_SKIP_CHECKSUM)).dataCheck).toBe(0);
  });

  it("keeps full 32-bit argument values", () => {
    const packet = { command: Command.WRTE, arg0: 0xfffffffe, arg1: 0x80000001, payload: Buffer.alloc(0) };
    expect(decodeHeader(encodePacket(packet))).toMatchObject({ arg0: 0xfffffffe, arg1: 0x80000001 });
  });

  it("names commands for logs", () => {
    expect(commandName(Command.CNXN)).toBe("CNXN");
    expect(commandName(0x12345678)).toBe("0x12345678");
  });
});

describe("streaming packet parser", () => {
  const packets: Packet[] = [
    { command: Command.CNXN, arg0: VERSION_SKIP_CHECKSUM, arg1: 1 << 20, payload: Buffer.from("host::features=shell_v2") },
    open,
    { command: Command.OKAY, arg0: 1, arg1: 7, payload: Buffer.alloc(0) },
    { command: Command.WRTE, arg0: 7, arg1: 1, payload: Buffer.alloc(70_000, 0xab) },
  ];
  const wire = Buffer.concat(packets.map((packet) => encodePacket(packet)));
  // Deep-equality on large Buffers is slow; compare payloads as base64 text.
  const flat = (list: Packet[]) => list.map((p) => ({ ...p, payload: p.payload.toString("base64") }));
  const expected = flat(packets);

  it("parses several packets from one chunk", () => {
    expect(flat(new PacketParser().push(wire))).toEqual(expected);
  });

  it("reassembles packets fed one byte at a time", () => {
    const parser = new PacketParser();
    const out: Packet[] = [];
    for (let i = 0; i < wire.length; i++) out.push(...parser.push(wire.subarray(i, i + 1)));
    expect(flat(out)).toEqual(expected);
    expect(parser.pendingBytes).toBe(0);
  });

  it("handles arbitrary chunk boundaries", () => {
    for (const size of [5, 23, 24, 25, 1000, 65_536]) {
      const parser = new PacketParser();
      const out: Packet[] = [];
      for (let i = 0; i < wire.length; i += size) out.push(...parser.push(wire.subarray(i, i + size)));
      expect(flat(out), `chunk size ${size}`).toEqual(expected);
    }
  });

  it("payloads do not alias the input buffer", () => {
    const bytes = encodePacket(open);
    const [packet] = new PacketParser().push(bytes);
    bytes.fill(0);
    expect(packet!.payload.toString()).toBe("shell:getprop\0");
  });

  it("rejects a bad magic and an oversized payload", () => {
    const bad = encodePacket(open);
    bad.writeUInt32LE(0, 20);
    expect(() => new PacketParser().push(bad)).toThrow(ProtocolError);
    const big = encodePacket({ command: Command.WRTE, arg0: 1, arg1: 1, payload: Buffer.alloc(4097) });
    expect(() => new PacketParser(4096).push(big.subarray(0, HEADER_SIZE))).toThrow(/exceeds max 4096/);
  });
});

describe("banner", () => {
  it("formats the device banner without a trailing NUL", () => {
    const banner = formatBanner({ productName: "panther", model: "Pixel 7", device: "panther", features: ["shell_v2"] });
    expect(banner).toBe("device::ro.product.name=panther;ro.product.model=Pixel 7;ro.product.device=panther;features=shell_v2");
    expect(parseBanner(banner)).toEqual({
      type: "device",
      props: { "ro.product.name": "panther", "ro.product.model": "Pixel 7", "ro.product.device": "panther", features: "shell_v2" },
      features: ["shell_v2"],
    });
  });

  it("neutralises separators inside values", () => {
    const banner = formatBanner({ productName: "a;b", model: "x:y=z", device: "d,e", features: [] });
    expect(parseBanner(banner).props).toMatchObject({ "ro.product.name": "a_b", "ro.product.model": "x_y_z", "ro.product.device": "d_e" });
  });

  it("parses the host banner", () => {
    expect(parseBanner("host::features=shell_v2,cmd,stat_v2").features).toEqual(["shell_v2", "cmd", "stat_v2"]);
  });
});

describe("shell v2 packets", () => {
  it("encodes id, LE length, data", () => {
    expect([...encodeShellPacket(ShellPacketId.STDOUT, "hi")]).toEqual([1, 2, 0, 0, 0, 0x68, 0x69]);
    expect([...encodeExitPacket(127)]).toEqual([3, 1, 0, 0, 0, 127]);
    expect([...encodeExitPacket(256 + 3)]).toEqual([3, 1, 0, 0, 0, 3]);
  });

  it("parses packets split across and packed into chunks", () => {
    const wire = Buffer.concat([
      encodeShellPacket(ShellPacketId.WINDOW_SIZE, "24x80,0x0"),
      encodeShellPacket(ShellPacketId.STDIN, "abc"),
      encodeShellPacket(ShellPacketId.CLOSE_STDIN),
    ]);
    const parser = new ShellPacketParser();
    const got = [...parser.push(wire.subarray(0, 3)), ...parser.push(wire.subarray(3, 17)), ...parser.push(wire.subarray(17))];
    expect(got.map((p) => [p.id, p.data.toString()])).toEqual([
      [ShellPacketId.WINDOW_SIZE, "24x80,0x0"],
      [ShellPacketId.STDIN, "abc"],
      [ShellPacketId.CLOSE_STDIN, ""],
    ]);
    expect(parseWindowSize("24x80,0x0")).toEqual({ rows: 24, cols: 80, xPixels: 0, yPixels: 0 });
  });
});
