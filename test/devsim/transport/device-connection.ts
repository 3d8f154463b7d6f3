import { randomBytes } from "node:crypto";
import type { Socket } from "node:net";
import { Command, MAX_PAYLOAD_V1, VERSION_MIN, VERSION_SKIP_CHECKSUM, commandName } from "../protocol/constants.js";
import { PacketParser } from "../protocol/packet-parser.js";
import { encodeHeader, encodePacket, type Packet } from "../protocol/packet.js";
import type { ServiceDevice } from "../services/service.js";
import type { ServiceRegistry } from "../services/service-registry.js";
import { AdbStream, type StreamLink } from "./adb-stream.js";
import { LinkShaper } from "./link-shaper.js";

/** What a connection needs from the device that accepted it. */
export interface ConnectionHost {
  /** CNXN banner, computed at handshake time so property changes show on reconnect. */
  banner(): string;
  readonly services: ServiceRegistry;
  readonly device: ServiceDevice;
  /** Max payload this device advertises (adbd: 1 MiB). */
  readonly maxPayload: number;
  /**
   * AUTH handshake: 'none' answers CNXN at once (default); 'deny' sends a
   * token and never accepts (adb shows `unauthorized`); 'accept' accepts the
   * host's public key (as if the user tapped "Allow").
   */
  auth?: () => AuthMode;
  /** Pending while the device boots: the CNXN answer waits for it. */
  ready?: () => Promise<void> | undefined;
  log(message: string): void;
  /** Per-packet tracing; arguments are only computed when set. */
  trace?: ((message: string) => void) | undefined;
}

/**
 * adbd's side of one TCP connection from the adb server: the CNXN handshake
 * (no AUTH), then OPEN/OKAY/WRTE/CLSE for any number of streams.
 */
export type AuthMode = "none" | "deny" | "accept";

const AUTH_TOKEN = 1;
const AUTH_SIGNATURE = 2;
const AUTH_RSAPUBLICKEY = 3;

export class DeviceConnection {
  /** The host's CNXN while AUTH is pending; answered by authorize(). */
  private pendingConnect: Packet | undefined;
  private readonly parser: PacketParser;
  private readonly streams = new Map<number, AdbStream>();
  private nextLocalId = 1;
  private version = VERSION_MIN;
  private negotiatedMaxPayload = MAX_PAYLOAD_V1;
  private isOnline = false;
  private isClosed = false;
  private readonly link: StreamLink;
  private readonly shaper: LinkShaper;
  /** Host-to-device bytes under the latency profile (upload bandwidth, the link's delay). */
  private readonly inbound: LinkShaper;
  /** Streams a hang fault froze: accepted, never answered, their data never acknowledged. */
  private readonly hung = new Set<number>();
  /** Resolves when the socket has closed and every stream has stopped. */
  readonly closed: Promise<void>;

  constructor(
    private readonly socket: Socket,
    private readonly host: ConnectionHost,
  ) {
    this.parser = new PacketParser(Math.max(host.maxPayload, MAX_PAYLOAD_V1));
    const connection = this;
    this.link = {
      send: (command, arg0, arg1, payload) => this.send(command, arg0, arg1, payload),
      get maxPayload() {
        return connection.negotiatedMaxPayload;
      },
      forget: (localId) => this.streams.delete(localId),
    };
    const faults = host.device.state.faults;
    const latency = host.device.state.latency;
    // A slow-link fault adds to the profile's link: its delay on top, the lower of the two bandwidths.
    this.shaper = new LinkShaper(
      () => {
        const f = faults.current;
        if (latency.instant) return f;
        const p = latency.profile;
        const bw = [f.bandwidthBytesPerSec ?? 0, p.downloadBytesPerSec].filter((b) => b > 0);
        return { latencyMs: (f.latencyMs ?? 0) + latency.draw("linkMs"), bandwidthBytesPerSec: bw.length > 0 ? Math.min(...bw) : 0 };
      },
      (data) => {
        if (!this.isClosed) socket.write(data);
      },
    );
    this.inbound = new LinkShaper(
      () => (latency.instant ? {} : { latencyMs: latency.draw("linkMs"), bandwidthBytesPerSec: latency.profile.uploadBytesPerSec }),
      (data) => {
        if (!this.isClosed) this.onData(data);
      },
    );
    // adbd disables Nagle; with it on, each request/ack round trip costs ~40 ms.
    socket.setNoDelay(true);
    this.closed = new Promise((resolve) => socket.once("close", () => resolve()));
    socket.on("data", (chunk: Buffer) => this.inbound.write(chunk));
    socket.on("error", (error) => this.host.log(`socket error: ${error.message}`));
    socket.once("close", () => this.onClose());
  }

  /** True once the host's CNXN was answered. */
  get online(): boolean {
    return this.isOnline;
  }

  get openStreams(): number {
    return this.streams.size;
  }

  /** Streams a hang fault froze that the host has not closed yet. */
  get hungStreams(): number {
    return this.hung.size;
  }

  /** Drops the connection at once (a device vanishing, a cable pulled). */
  destroy(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    let packets: Packet[];
    try {
      packets = this.parser.push(chunk);
    } catch (error) {
      // Like adb: a framing error is fatal to the whole transport.
      this.host.log(`protocol error, dropping connection: ${(error as Error).message}`);
      this.destroy();
      return;
    }
    for (const packet of packets) {
      if (this.isClosed) return;
      this.handle(packet);
    }
  }

  private handle(packet: Packet): void {
    this.host.trace?.(`<- ${describe(packet)}`);
    switch (packet.command) {
      case Command.AUTH:
        return this.onAuth(packet);
      case Command.CNXN: {
        if ((this.host.auth?.() ?? "none") !== "none" && !this.isOnline) {
          // Demand authentication: a fresh 20-byte token, as adbd sends.
          this.pendingConnect = packet;
          this.send(Command.AUTH, AUTH_TOKEN, 0, randomBytes(20));
          return;
        }
        const booting = this.host.ready?.();
        if (!booting) return this.onConnect(packet);
        void booting.then(() => {
          if (!this.isClosed) this.onConnect(packet);
        });
        return;
      }
      case Command.OPEN:
        if (this.isOnline) void this.onOpen(packet);
        return;
      case Command.OKAY:
        this.streams.get(packet.arg1)?.onOkay();
        return;
      case Command.WRTE:
        this.streams.get(packet.arg1)?.onWrite(packet.payload);
        return;
      case Command.CLSE:
        // arg1 names our stream; CLSEs for unknown ids (e.g. the host echoing ours) are ignored.
        // A hung stream the host closes is gone: tests wait on that to see a caller's end reach the phone.
        if (this.hung.delete(packet.arg1)) return;
        this.streams.get(packet.arg1)?.onRemoteClose();
        return;
      default:
        // SYNC, STLS and unknown commands: ignore, as adbd would.
        return;
    }
  }

  /** True while the host waits in `unauthorized`. */
  get awaitingAuthorization(): boolean {
    return this.pendingConnect !== undefined && !this.isOnline;
  }

  /** The user accepted the key: complete the handshake. */
  authorize(): void {
    const packet = this.pendingConnect;
    this.pendingConnect = undefined;
    if (packet && !this.isClosed) this.onConnect(packet);
  }

  private onAuth(packet: Packet): void {
    if (!this.pendingConnect) return;
    if (packet.arg0 === AUTH_SIGNATURE) {
      // We know no keys: every signature fails and the host is asked again.
      this.send(Command.AUTH, AUTH_TOKEN, 0, randomBytes(20));
    } else if (packet.arg0 === AUTH_RSAPUBLICKEY && this.host.auth?.() === "accept") {
      this.authorize();
    }
  }

  private onConnect(packet: Packet): void {
    // A repeated CNXN means the host restarted the transport: old streams are gone.
    for (const stream of [...this.streams.values()]) stream.destroy();
    this.version = Math.min(packet.arg0, VERSION_SKIP_CHECKSUM);
    this.negotiatedMaxPayload = Math.min(packet.arg1, this.host.maxPayload);
    this.isOnline = true;
    this.send(Command.CNXN, VERSION_SKIP_CHECKSUM, this.host.maxPayload, Buffer.from(this.host.banner()));
  }

  private async onOpen(packet: Packet): Promise<void> {
    const remoteId = packet.arg0;
    const name = packet.payload.toString("utf8").replace(/\0+$/, "");
    if (this.host.device.state.faults.isHung(name)) {
      // Hang fault: accept, then stay silent; the caller waits until its own deadline.
      const id = this.allocateId();
      this.hung.add(id);
      this.send(Command.OKAY, id, remoteId);
      return;
    }
    // Hold fault: as a frozen phone, read the OPEN only once the test releases it.
    const hold = this.host.device.state.faults.hold(name);
    if (hold) {
      await hold;
      if (this.isClosed) return;
    }
    // adbd forks a process for shell: and exec: before it answers.
    const latency = this.host.device.state.latency;
    if (!latency.instant && /^(shell|exec)(,[^:]*)?:/.test(name)) await latency.wait("shellOpenMs");
    if (this.isClosed) return;
    let runner;
    try {
      runner = await this.host.services.resolve(name)?.open({ name, device: this.host.device });
    } catch (error) {
      this.host.log(`service ${JSON.stringify(name)} failed to open: ${(error as Error).message}`);
    }
    if (this.isClosed) return;
    if (!runner) {
      this.host.log(`refusing service ${JSON.stringify(name)}`);
      this.send(Command.CLSE, 0, remoteId);
      return;
    }
    const stream = new AdbStream(this.allocateId(), remoteId, this.link);
    this.streams.set(stream.localId, stream);
    this.send(Command.OKAY, stream.localId, remoteId);
    try {
      await runner(stream);
    } catch (error) {
      if (!stream.closed) this.host.log(`service ${JSON.stringify(name)} failed: ${(error as Error).stack ?? String(error)}`);
    }
    stream.end();
  }

  private allocateId(): number {
    for (;;) {
      const id = this.nextLocalId;
      this.nextLocalId = this.nextLocalId >= 0xffffffff ? 1 : this.nextLocalId + 1;
      if (!this.streams.has(id) && !this.hung.has(id)) return id;
    }
  }

  private send(command: number, arg0: number, arg1: number, payload: Buffer | readonly Buffer[] = Buffer.alloc(0)): void {
    if (this.isClosed) return;
    const parts = Array.isArray(payload) ? payload : [payload as Buffer];
    const size = parts.reduce((sum, part) => sum + part.length, 0);
    if (this.host.trace) this.host.trace(`-> ${describe({ command, arg0, arg1, payload: Buffer.concat(parts, size) })}`);
    if (size < 4096) {
      this.shaper.write(encodePacket({ command, arg0, arg1, payload: parts.length === 1 ? parts[0]! : Buffer.concat(parts, size) }, this.version));
      return;
    }
    // Header and payload parts go out as separate writes: a 1 MiB WRTE is never copied together.
    this.shaper.write(encodeHeader(command, arg0, arg1, parts, this.version));
    for (const part of parts) this.shaper.write(part);
  }

  private onClose(): void {
    this.isClosed = true;
    this.isOnline = false;
    this.shaper.stop();
    this.inbound.stop();
    this.hung.clear();
    for (const stream of [...this.streams.values()]) stream.destroy();
    this.streams.clear();
  }
}

function describe(packet: Packet): string {
  const preview = packet.command === Command.WRTE ? `${packet.payload.length} bytes` : JSON.stringify(packet.payload.toString("latin1").slice(0, 80));
  return `${commandName(packet.command)}(${packet.arg0}, ${packet.arg1}) ${preview}`;
}
