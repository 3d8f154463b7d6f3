import type { Socket } from "node:net";
import { A_CLSE, A_CNXN, A_OKAY, A_OPEN, A_VERSION_MIN, A_VERSION_SKIP_CHECKSUM, A_WRTE, AdbProtocolError, MAX_PAYLOAD, MAX_PAYLOAD_V1, PacketParser, encodePacket, type AdbPacket } from "./adb-packet.js";
import { AdbdStream, type AdbStreamOpener, type StreamHost } from "./adbd-stream.js";

export interface AdbdConnectionOptions {
  /** The CNXN banner (adb-banner.ts formatBanner). */
  banner: string;
  openStream: AdbStreamOpener;
  log: (line: string) => void;
}

/**
 * adbd's side of one TCP connection from a local adb server. No AUTH: adb
 * servers never require it, and the farm lease (checked on every stream by
 * the coordinator), not the local adb key, is what authorizes this phone.
 */
export class AdbdConnection implements StreamHost {
  private readonly parser = new PacketParser(MAX_PAYLOAD);
  private readonly streams = new Map<number, AdbdStream>();
  private online = false;
  private version = A_VERSION_SKIP_CHECKSUM;
  maxPayload = MAX_PAYLOAD_V1;
  private nextId = 1;
  private closed = false;
  private readonly closeWaiters: (() => void)[] = [];

  constructor(
    private readonly socket: Socket,
    private readonly opts: AdbdConnectionOptions,
  ) {
    socket.setNoDelay(true);
    socket.on("data", (data: Buffer) => this.onData(data));
    socket.on("error", (err) => this.log(`adb server connection failed: ${err.message}`));
    socket.on("close", () => this.close());
  }

  /** Resolves once the connection is closed. */
  whenClosed(): Promise<void> {
    return this.closed ? Promise.resolve() : new Promise((resolve) => this.closeWaiters.push(resolve));
  }

  send(command: number, arg0: number, arg1: number, payload?: Uint8Array): void {
    if (this.closed) return;
    this.socket.write(encodePacket(command, arg0, arg1, payload, this.version < A_VERSION_SKIP_CHECKSUM));
  }

  forget(localId: number): void {
    this.streams.delete(localId);
  }

  log(line: string): void {
    this.opts.log(line);
  }

  protocolError(reason: string): void {
    this.log(`${reason}; dropping its connection`);
    this.close();
  }

  /** Drops the connection and every stream in it: the adb server sees the phone go offline. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const s of [...this.streams.values()]) s.abort();
    this.streams.clear();
    this.socket.destroy();
    for (const w of this.closeWaiters.splice(0)) w();
  }

  private onData(data: Buffer): void {
    let packets: AdbPacket[];
    try {
      packets = this.parser.push(data);
    } catch (err) {
      // As adb does with a broken peer: drop the transport.
      this.log(`adb server sent a bad packet (${err instanceof AdbProtocolError ? err.message : String(err)}); dropping its connection`);
      this.close();
      return;
    }
    for (const p of packets) this.handle(p);
  }

  private handle(p: AdbPacket): void {
    switch (p.command) {
      case A_CNXN:
        return this.onConnect(p);
      case A_OPEN:
        return this.onOpen(p);
      case A_OKAY:
        if (p.arg1 !== 0 && this.streams.get(p.arg1)?.remoteId === p.arg0) this.streams.get(p.arg1)?.onAck();
        return;
      case A_WRTE: {
        const s = this.streams.get(p.arg1);
        if (s?.remoteId === p.arg0) s.onWrite(p.payload);
        return;
      }
      case A_CLSE: {
        const s = this.streams.get(p.arg1);
        if (s?.remoteId === p.arg0) s.onHostClose();
        return;
      }
      default:
        // AUTH (we never ask), STLS, SYNC and unknown commands: adbd ignores what it did not ask for.
        return;
    }
  }

  /** The host's CNXN: negotiate version and payload size, answer with ours. A repeated CNXN restarts the transport. */
  private onConnect(p: AdbPacket): void {
    for (const s of [...this.streams.values()]) s.abort();
    this.streams.clear();
    this.version = Math.max(A_VERSION_MIN, Math.min(p.arg0 >>> 0, A_VERSION_SKIP_CHECKSUM));
    this.maxPayload = Math.max(MAX_PAYLOAD_V1, Math.min(p.arg1 >>> 0, MAX_PAYLOAD));
    this.online = true;
    this.send(A_CNXN, this.version, this.maxPayload, Buffer.from(this.opts.banner, "utf8"));
  }

  private onOpen(p: AdbPacket): void {
    // An OPEN before CNXN, or one without a host id, is not a stream.
    if (!this.online || p.arg0 === 0) return;
    const nul = p.payload.indexOf(0);
    const service = p.payload.subarray(0, nul < 0 ? p.payload.length : nul).toString("utf8");
    const localId = this.allocateId();
    const stream = new AdbdStream(this, localId, p.arg0);
    this.streams.set(localId, stream);
    void stream.open(service, this.opts.openStream);
  }

  private allocateId(): number {
    for (;;) {
      const id = this.nextId;
      this.nextId = this.nextId >= 0x7fffffff ? 1 : this.nextId + 1;
      if (!this.streams.has(id)) return id;
    }
  }
}
