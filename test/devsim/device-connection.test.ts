import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { SimDevice } from "./device/sim-device.js";
import { Command, HEADER_SIZE, MAX_PAYLOAD, VERSION_MIN, VERSION_SKIP_CHECKSUM, commandName } from "./protocol/constants.js";
import { PacketParser } from "./protocol/packet-parser.js";
import { checksum, decodeHeader, encodePacket, type Packet } from "./protocol/packet.js";
import { ShellPacketId, ShellPacketParser, encodeShellPacket } from "./services/shell-v2-packet.js";

/** A scripted adb server end of one connection, speaking raw packets. */
class WireHost {
  readonly raw: Buffer[] = [];
  private readonly parser = new PacketParser(MAX_PAYLOAD);
  private readonly queue: Packet[] = [];
  private waiter: (() => void) | undefined;
  closed = false;
  private readonly closedPromise: Promise<void>;

  private constructor(private readonly socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.raw.push(chunk);
      this.queue.push(...this.parser.push(chunk));
      this.wake();
    });
    this.closedPromise = new Promise((resolve) =>
      socket.on("close", () => {
        this.closed = true;
        this.wake();
        resolve();
      })
    );
  }

  static async open(port: number): Promise<WireHost> {
    const socket = connect({ host: "127.0.0.1", port });
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    return new WireHost(socket);
  }

  send(command: number, arg0: number, arg1: number, payload: Buffer | string = Buffer.alloc(0)): void {
    this.socket.write(encodePacket({ command, arg0, arg1, payload: Buffer.from(payload) }, VERSION_SKIP_CHECKSUM));
  }

  /** Handshake as adb 29 does it; returns the device's CNXN. */
  async connect(version = VERSION_SKIP_CHECKSUM, maxdata = MAX_PAYLOAD): Promise<Packet> {
    this.send(Command.CNXN, version, maxdata, "host::features=shell_v2,cmd,stat_v2");
    return this.next();
  }

  /** The next packet from the device (rejects if the connection closes first). */
  async next(): Promise<Packet> {
    for (;;) {
      const packet = this.queue.shift();
      if (packet) return packet;
      if (this.closed) throw new Error("device closed the connection");
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }

  /** Opens a stream and returns the device's local id (or 0 if refused). */
  async openStream(hostId: number, service: string): Promise<number> {
    this.send(Command.OPEN, hostId, 0, `${service}\0`);
    const reply = await this.next();
    if (reply.command === Command.CLSE) return 0;
    expect(commandName(reply.command)).toBe("OKAY");
    expect(reply.arg1).toBe(hostId);
    return reply.arg0;
  }

  /** Reads a stream to its CLSE, acknowledging each WRTE (and skipping OKAYs for our writes); returns the bytes. */
  async readToClose(hostId: number): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for (;;) {
      const packet = await this.next();
      expect(packet.arg1).toBe(hostId);
      if (packet.command === Command.CLSE) return Buffer.concat(chunks);
      if (packet.command === Command.OKAY) continue;
      expect(commandName(packet.command)).toBe("WRTE");
      chunks.push(packet.payload);
      this.send(Command.OKAY, hostId, packet.arg0);
    }
  }

  waitClosed(): Promise<void> {
    return this.closedPromise;
  }

  destroy(): void {
    this.socket.destroy();
  }

  private wake(): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.();
  }
}

const devices: SimDevice[] = [];
const hosts: WireHost[] = [];

async function startDevice(options: ConstructorParameters<typeof SimDevice>[0] = {}): Promise<{ device: SimDevice; port: number }> {
  const device = new SimDevice({ serialno: "WIRE0001", ...options });
  devices.push(device);
  return { device, port: await device.listen() };
}

async function openHost(port: number): Promise<WireHost> {
  const host = await WireHost.open(port);
  hosts.push(host);
  return host;
}

afterEach(async () => {
  for (const host of hosts.splice(0)) host.destroy();
  await Promise.all(devices.splice(0).map((device) => device.close()));
});

describe("device connection on the wire", () => {
  it("answers CNXN with version, 1 MiB maxdata and the banner", async () => {
    const { port } = await startDevice();
    const host = await openHost(port);
    const reply = await host.connect();
    expect(commandName(reply.command)).toBe("CNXN");
    expect(reply.arg0).toBe(VERSION_SKIP_CHECKSUM);
    expect(reply.arg1).toBe(MAX_PAYLOAD);
    expect(reply.payload.toString()).toBe("device::ro.product.name=panther;ro.product.model=Pixel 7;ro.product.device=panther;features=shell_v2,stat_v2,ls_v2,fixed_push_mkdir");
    // Negotiated version 0x01000001: checksum left at 0.
    expect(decodeHeader(Buffer.concat(host.raw)).dataCheck).toBe(0);
  });

  it("fills checksums when the host negotiates version 0x01000000", async () => {
    const { port } = await startDevice();
    const host = await openHost(port);
    const reply = await host.connect(VERSION_MIN);
    const header = decodeHeader(Buffer.concat(host.raw).subarray(0, HEADER_SIZE));
    expect(header.dataCheck).toBe(checksum(reply.payload));
    expect(header.dataCheck).not.toBe(0);
  });

  it("runs shell: (v1): OKAY, raw output, CLSE", async () => {
    const { port } = await startDevice();
    const host = await openHost(port);
    await host.connect();
    const localId = await host.openStream(1, "shell:echo out; nosuchcmd; echo $?");
    expect(localId).toBeGreaterThan(0);
    expect((await host.readToClose(1)).toString()).toBe("out\n/system/bin/sh: nosuchcmd: not found\n127\n");
  });

  it("runs shell,v2: stdin packets in, stdout/stderr/exit packets out, then CLSE", async () => {
    const { port } = await startDevice();
    const host = await openHost(port);
    await host.connect();
    const localId = await host.openStream(5, "shell,v2,raw:cat; echo oops >&2; exit 7");
    host.send(Command.WRTE, 5, localId, Buffer.concat([encodeShellPacket(ShellPacketId.WINDOW_SIZE, "24x80,0x0"), encodeShellPacket(ShellPacketId.STDIN, "piped ")]));
    expect(commandName((await host.next()).command)).toBe("OKAY");
    // The device may answer with output before acknowledging this one; readToClose skips the OKAY.
    host.send(Command.WRTE, 5, localId, Buffer.concat([encodeShellPacket(ShellPacketId.STDIN, "input"), encodeShellPacket(ShellPacketId.CLOSE_STDIN)]));
    const packets = new ShellPacketParser().push(await host.readToClose(5));
    const stdout = Buffer.concat(packets.filter((p) => p.id === ShellPacketId.STDOUT).map((p) => p.data)).toString();
    const stderr = Buffer.concat(packets.filter((p) => p.id === ShellPacketId.STDERR).map((p) => p.data)).toString();
    expect(stdout).toBe("piped input");
    expect(stderr).toBe("oops\n");
    expect(packets.at(-1)).toMatchObject({ id: ShellPacketId.EXIT, data: Buffer.from([7]) });
  });

  it("a pty shell translates \\n to \\r\\n like a terminal", async () => {
    const { port } = await startDevice();
    const host = await openHost(port);
    await host.connect();
    await host.openStream(6, "shell,v2,pty:echo a; echo b");
    const packets = new ShellPacketParser().push(await host.readToClose(6));
    const stdout = Buffer.concat(packets.filter((p) => p.id === ShellPacketId.STDOUT).map((p) => p.data)).toString();
    expect(stdout).toBe("a\r\nb\r\n");
  });

  it("sends WRTEs no larger than the host maxdata, one at a time", async () => {
    const { port, device } = await startDevice();
    device.setProp("debug.big", "x".repeat(10_000));
    const host = await openHost(port);
    await host.connect(VERSION_SKIP_CHECKSUM, 4096);
    const bigId = await host.openStream(1, "shell:getprop debug.big");
    const first = await host.next();
    expect(commandName(first.command)).toBe("WRTE");
    expect(first.payload.length).toBe(4096);
    // Without our OKAY the device must not send more on stream 1: another
    // stream's whole exchange completes with nothing for stream 1 in between.
    await host.openStream(2, "shell:echo other");
    expect((await host.readToClose(2)).toString()).toBe("other\n");
    host.send(Command.OKAY, 1, bigId);
    const rest = await host.readToClose(1);
    expect(first.payload.length + rest.length).toBe(10_001);
  });

  it("refuses unknown services with CLSE(0, id) and ignores unknown stream ids", async () => {
    const { port } = await startDevice();
    const host = await openHost(port);
    await host.connect();
    host.send(Command.OPEN, 3, 0, "jdwp:1234\0");
    expect(await host.next()).toMatchObject({ command: Command.CLSE, arg0: 0, arg1: 3 });
    host.send(Command.OKAY, 77, 999);
    host.send(Command.WRTE, 77, 999, "stray");
    host.send(Command.CLSE, 77, 999);
    host.send(0x12345678, 0, 0);
    await host.openStream(4, "shell:echo still alive");
    expect((await host.readToClose(4)).toString()).toBe("still alive\n");
  });

  it("stops the service and echoes CLSE when the host closes a stream", async () => {
    const { port } = await startDevice();
    const host = await openHost(port);
    await host.connect();
    const localId = await host.openStream(1, "shell:sleep 30");
    host.send(Command.CLSE, 1, localId);
    expect(await host.next()).toMatchObject({ command: Command.CLSE, arg0: localId, arg1: 1 });
  });

  it("tolerates connections without CNXN and ignores OPEN before CNXN", async () => {
    const { port } = await startDevice();
    const silent = await openHost(port);
    silent.destroy();
    const early = await openHost(port);
    early.send(Command.OPEN, 1, 0, "shell:echo early\0");
    expect(commandName((await early.connect()).command)).toBe("CNXN");
    await early.openStream(2, "shell:echo ok");
    expect((await early.readToClose(2)).toString()).toBe("ok\n");
  });

  it("drops the connection on a payload above maxdata, like adb", async () => {
    const { port } = await startDevice({ maxPayload: 4096 });
    const host = await openHost(port);
    await host.connect();
    const localId = await host.openStream(1, "shell:cat");
    host.send(Command.WRTE, 1, localId, Buffer.alloc(4097));
    await host.waitClosed();
    expect(host.closed).toBe(true);
  });

  it("close() drops live connections and stops listening", async () => {
    const { port, device } = await startDevice();
    const host = await openHost(port);
    await host.connect();
    expect(device.onlineConnections).toBe(1);
    await device.close();
    await host.waitClosed();
    expect(device.port).toBeUndefined();
    await expect(WireHost.open(port)).rejects.toThrow(/ECONNREFUSED/);
  });

  it("never listens in the emulator port range", async () => {
    const device = new SimDevice();
    await expect(device.listen("127.0.0.1", 5555)).rejects.toThrow(/reserved/);
    await expect(device.listen("127.0.0.1", 5037)).rejects.toThrow(/reserved/);
  });
});
