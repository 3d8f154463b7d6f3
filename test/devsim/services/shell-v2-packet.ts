/** Packet ids of the shell v2 protocol (shell_protocol.h). */
export const ShellPacketId = {
  STDIN: 0,
  STDOUT: 1,
  STDERR: 2,
  EXIT: 3,
  CLOSE_STDIN: 4,
  WINDOW_SIZE: 5,
} as const;

export const SHELL_PACKET_HEADER = 5;

export interface ShellPacket {
  id: number;
  data: Buffer;
}

/** id (1 byte) + little-endian length (4 bytes) + data. */
export function encodeShellPacket(id: number, data: Uint8Array | string = Buffer.alloc(0)): Buffer {
  const payload = typeof data === "string" ? Buffer.from(data) : data;
  const out = Buffer.allocUnsafe(SHELL_PACKET_HEADER + payload.length);
  out.writeUInt8(id, 0);
  out.writeUInt32LE(payload.length, 1);
  out.set(payload, SHELL_PACKET_HEADER);
  return out;
}

/** Exit packet: one byte of status (a signal N is reported as 128+N). */
export function encodeExitPacket(status: number): Buffer {
  return encodeShellPacket(ShellPacketId.EXIT, Buffer.from([status & 0xff]));
}

/**
 * Parses shell v2 packets from a byte stream: the host's WRTEs are arbitrary
 * slices, so a packet may span WRTEs or several may share one.
 */
export class ShellPacketParser {
  private buffer = Buffer.alloc(0);

  push(chunk: Uint8Array): ShellPacket[] {
    this.buffer = this.buffer.length === 0 ? Buffer.from(chunk) : Buffer.concat([this.buffer, chunk]);
    const packets: ShellPacket[] = [];
    while (this.buffer.length >= SHELL_PACKET_HEADER) {
      const length = this.buffer.readUInt32LE(1);
      if (this.buffer.length < SHELL_PACKET_HEADER + length) break;
      packets.push({ id: this.buffer.readUInt8(0), data: this.buffer.subarray(SHELL_PACKET_HEADER, SHELL_PACKET_HEADER + length) });
      this.buffer = this.buffer.subarray(SHELL_PACKET_HEADER + length);
    }
    return packets;
  }
}

/** Parses a window-size payload `ROWSxCOLS,XPIXxYPIX` (e.g. `24x80,0x0`). */
export function parseWindowSize(text: string): { rows: number; cols: number; xPixels: number; yPixels: number } | undefined {
  const match = /^(\d+)x(\d+),(\d+)x(\d+)$/.exec(text.replace(/\0+$/, ""));
  if (!match) return undefined;
  return { rows: Number(match[1]), cols: Number(match[2]), xPixels: Number(match[3]), yPixels: Number(match[4]) };
}
