import { randomBytes } from "node:crypto";
import { createServer, type Server, type Socket } from "node:net";
import { MAX_PAYLOAD } from "../protocol/constants.js";
import { formatBanner } from "../protocol/banner.js";
import { defaultServices } from "../services/default-services.js";
import type { ServiceRegistry } from "../services/service-registry.js";
import { DeviceConnection, type AuthMode, type ConnectionHost } from "../transport/device-connection.js";
import { isReservedPort } from "../transport/port-rules.js";
import { defaultProperties } from "./default-properties.js";
import { profileAt, type DeviceProfile } from "./device-profiles.js";
import { DeviceState } from "./device-state.js";
import type { LatencyProfileName } from "../latency/latency-profiles.js";
import type { DeviceFaults } from "../faults/device-faults.js";

/** adb features the simulator implements; only these may be advertised. */
export const IMPLEMENTED_FEATURES = ["shell_v2", "stat_v2", "ls_v2", "fixed_push_mkdir"] as const;

export interface SimDeviceOptions {
  /** ro.serialno / ro.boot.serialno; random if omitted. */
  serialno?: string;
  /** Phone model to imitate: a profile or an index into DEVICE_PROFILES. */
  profile?: DeviceProfile | number;
  /** Property overrides, applied over the profile's defaults. */
  props?: Record<string, string>;
  bootId?: string;
  /** adb features to advertise (default: all implemented, i.e. shell_v2). */
  features?: readonly string[];
  /** Max payload to advertise in CNXN (default 1 MiB, like adbd). */
  maxPayload?: number;
  /** Services offered (default: shell). */
  services?: ServiceRegistry;
  /** AUTH handshake: 'none' (default), 'deny' (adb: unauthorized) or 'accept' (after the host sends its key). */
  auth?: AuthMode;
  /** How long a reboot keeps the device away (default 2 s, or the latency profile's reboot time). */
  rebootDownMs?: number;
  /** How long the phone takes per service: instant (default), pixel-usb, emulator or wifi-adb (test/devsim/README.md). */
  latency?: LatencyProfileName;
  /** Seed of the latency profile's jitter (same seed, same delays). */
  latencySeed?: number;
  /** Diagnostics; default: stderr when DEVSIM_DEBUG is set. */
  log?: (message: string) => void;
  /** Per-packet trace; default: stderr when DEVSIM_DEBUG=packets. */
  trace?: (message: string) => void;
}

/** Random serial number in the style of real ones (uppercase letters and digits). */
export function randomSerialno(): string {
  const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789";
  return [...randomBytes(12)].map((byte) => alphabet[byte % alphabet.length]).join("");
}

const MAX_PORT_ATTEMPTS = 50;

/**
 * A simulated Android phone reachable like one in `adb tcpip` mode: listen on
 * a loopback port, then `adb connect 127.0.0.1:PORT`.
 */
export class SimDevice {
  readonly state: DeviceState;
  readonly services: ServiceRegistry;
  readonly features: ReadonlySet<string>;
  readonly maxPayload: number;
  private readonly servers = new Map<number, { server: Server; host: string }>();
  /** Addresses listened on before a vanish, for restore(). */
  private lastAddresses: Array<{ host: string; port: number }> = [];
  private readonly connections = new Set<DeviceConnection>();
  private readonly log: (message: string) => void;
  private readonly trace: ((message: string) => void) | undefined;
  /** Pending while the device "boots": connections are accepted but CNXN waits. */
  private booting: Promise<void> | undefined;
  /** AUTH mode for new connections; change at run time to test authorization flows. */
  auth: AuthMode;
  rebootDownMs: number;
  private bootTimer: NodeJS.Timeout | undefined;

  constructor(options: SimDeviceOptions = {}) {
    const profile = typeof options.profile === "object" ? options.profile : profileAt(options.profile ?? 0);
    const serialno = options.serialno ?? options.props?.["ro.serialno"] ?? randomSerialno();
    this.state = new DeviceState({ ...defaultProperties(profile, serialno), ...options.props }, options.bootId, { width: profile.width, height: profile.height, density: profile.density });
    this.services = options.services ?? defaultServices();
    this.features = new Set(options.features ?? IMPLEMENTED_FEATURES);
    this.maxPayload = options.maxPayload ?? MAX_PAYLOAD;
    this.auth = options.auth ?? "none";
    if (options.latency) this.state.latency.set(options.latency);
    if (options.latencySeed !== undefined) this.state.latency.reseed(options.latencySeed);
    this.rebootDownMs = options.rebootDownMs ?? this.state.latency.profile.rebootMs;
    const debug = process.env["DEVSIM_DEBUG"];
    this.log = options.log ?? (debug ? (message) => process.stderr.write(`[devsim ${this.serialno}] ${message}\n`) : () => {});
    this.trace = options.trace ?? (debug === "packets" ? this.log : undefined);
    this.state.hooks = {
      vanish: () => void this.close(),
      reboot: (downMs) => this.reboot(downMs),
      restartAdbd: () => this.dropConnections(),
    };
    this.state.faults.onVanish = () => void this.close();
  }

  get serialno(): string {
    return this.state.props.get("ro.serialno") ?? "";
  }

  get model(): string {
    return this.state.props.get("ro.product.model") ?? "";
  }

  /** Faults switched on for this device: `device.faults.set({ storageFull: true })`. */
  get faults(): DeviceFaults {
    return this.state.faults;
  }

  /** Snapshot of all system properties, sorted by key. */
  get props(): Record<string, string> {
    return this.state.props.toRecord();
  }

  getProp(key: string): string | undefined {
    return this.state.props.get(key);
  }

  /** Sets any property (ro.* included). Banner fields take effect on the next CNXN. */
  setProp(key: string, value: string): void {
    this.state.props.set(key, value);
  }

  get bootId(): string {
    return this.state.bootId;
  }

  /** First port being listened on, if listening. */
  get port(): number | undefined {
    return this.servers.keys().next().value;
  }

  /** Every port this phone is reachable on (one phone, several adb serials). */
  get ports(): number[] {
    return [...this.servers.keys()];
  }

  get isBooting(): boolean {
    return this.booting !== undefined;
  }

  /** Connections from the adb server that completed the CNXN handshake. */
  get onlineConnections(): number {
    return [...this.connections].filter((connection) => connection.online).length;
  }

  /** Streams a hang fault froze (accepted, never read) that the adb server has not closed yet. */
  get hungStreams(): number {
    return [...this.connections].reduce((n, connection) => n + connection.hungStreams, 0);
  }

  /** The CNXN banner, from current properties and features. */
  banner(): string {
    const props = this.state.props;
    return formatBanner({
      productName: props.get("ro.product.name") ?? "",
      model: props.get("ro.product.model") ?? "",
      device: props.get("ro.product.device") ?? "",
      features: [...this.features],
    });
  }

  /**
   * Starts accepting adb connections; resolves to the port. Port 0 picks a
   * free port, re-picking if the OS hands out one in the emulator range.
   * May be called again to expose the same phone on another port.
   */
  async listen(host = "127.0.0.1", port = 0): Promise<number> {
    if (port !== 0 && this.servers.has(port)) throw new Error(`device ${this.serialno} is already listening on port ${port}`);
    if (port !== 0 && isReservedPort(port)) throw new Error(`port ${port} is reserved (adb server or emulator range 5555-5585)`);
    for (let attempt = 0; attempt < MAX_PORT_ATTEMPTS; attempt++) {
      const server = createServer((socket) => this.accept(socket));
      const bound = await listenOn(server, host, port);
      if (port === 0 && isReservedPort(bound)) {
        await closeServer(server);
        continue;
      }
      this.servers.set(bound, { server, host });
      if (!this.state.props.has("service.adb.tcp.port")) this.state.props.set("service.adb.tcp.port", String(bound));
      this.log(`listening on ${host}:${bound}`);
      return bound;
    }
    throw new Error("could not get a port outside the adb emulator range");
  }

  /** Vanishes: drops every connection at once and stops listening (adb: offline, later gone). */
  async close(): Promise<void> {
    const servers = [...this.servers.values()];
    this.log(`vanishing: ${this.connections.size} connection(s), ports ${[...this.servers.keys()].join(", ") || "none"}`);
    if (servers.length > 0) this.lastAddresses = [...this.servers.entries()].map(([port, { host }]) => ({ host, port }));
    this.servers.clear();
    clearTimeout(this.bootTimer);
    const connections = [...this.connections];
    for (const connection of connections) connection.destroy();
    await Promise.all([...servers.map(({ server }) => closeServer(server)), ...connections.map((connection) => connection.closed)]);
  }

  /** Alias of close(), named after the fault. */
  vanish(): Promise<void> {
    return this.close();
  }

  /** Listens again on the ports used before the last vanish; adb's retries pick it up. */
  async restore(): Promise<void> {
    for (const { host, port } of this.lastAddresses) if (!this.servers.has(port)) await this.listen(host, port);
  }

  /**
   * Reboots: every connection drops, a new boot id is drawn, and for downMs
   * the device accepts TCP but withholds CNXN (adb shows it offline), as a
   * phone whose adbd is not up yet.
   */
  reboot(downMs = this.rebootDownMs): void {
    this.state.reboot();
    this.state.props.set("sys.boot_completed", "");
    this.state.props.set("dev.bootcomplete", "");
    clearTimeout(this.bootTimer);
    let booted!: () => void;
    this.booting = new Promise((resolve) => (booted = resolve));
    this.bootTimer = setTimeout(() => {
      this.state.props.set("sys.boot_completed", "1");
      this.state.props.set("dev.bootcomplete", "1");
      this.booting = undefined;
      booted();
    }, downMs);
    this.dropConnections();
  }

  /** The user taps "Allow" on every pending USB-debugging prompt: unauthorized → device. */
  authorize(): void {
    for (const connection of this.connections) connection.authorize();
  }

  /** Vanishes and releases host resources (SDK servers, recorders); for shutdown. */
  async dispose(): Promise<void> {
    await this.close();
    await this.state.dispose();
  }

  /** Drops TCP connections but keeps listening (adbd restarting). */
  private dropConnections(): void {
    for (const connection of [...this.connections]) connection.destroy();
  }

  private accept(socket: Socket): void {
    const device = this;
    const host: ConnectionHost = {
      banner: () => this.banner(),
      services: this.services,
      device: { state: this.state, features: this.features },
      get maxPayload() {
        return device.maxPayload;
      },
      ready: () => this.booting,
      auth: () => this.auth,
      log: this.log,
      trace: this.trace,
    };
    const connection = new DeviceConnection(socket, host);
    this.log(`connection from ${socket.remotePort} on ${socket.localPort}`);
    this.connections.add(connection);
    void connection.closed.then(() => this.connections.delete(connection));
  }
}

function listenOn(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port, exclusive: true }, () => {
      server.off("error", reject);
      const address = server.address();
      if (address && typeof address === "object") resolve(address.port);
      else reject(new Error("server has no TCP address"));
    });
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
