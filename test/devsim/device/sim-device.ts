import { randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { MAX_PAYLOAD } from '../protocol/constants.js';
import { formatBanner } from '../protocol/banner.js';
import { defaultServices } from '../services/default-services.js';
import type { ServiceRegistry } from '../services/service-registry.js';
import { DeviceConnection, type ConnectionHost } from '../transport/device-connection.js';
import { isReservedPort } from '../transport/port-rules.js';
import { defaultProperties } from './default-properties.js';
import { profileAt, type DeviceProfile } from './device-profiles.js';
import { DeviceState } from './device-state.js';

/** adb features the simulator implements; only these may be advertised. */
export const IMPLEMENTED_FEATURES = ['shell_v2'] as const;

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
  /** Diagnostics; default: stderr when DEVSIM_DEBUG is set. */
  log?: (message: string) => void;
  /** Per-packet trace; default: stderr when DEVSIM_DEBUG=packets. */
  trace?: (message: string) => void;
}

/** Random serial number in the style of real ones (uppercase letters and digits). */
export function randomSerialno(): string {
  const alphabet = 'ABCDEFGHJKLMNPQRSTUVWXYZ0123456789';
  return [...randomBytes(12)].map((byte) => alphabet[byte % alphabet.length]).join('');
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
  private server: Server | undefined;
  private listenPort: number | undefined;
  private readonly connections = new Set<DeviceConnection>();
  private readonly log: (message: string) => void;
  private readonly trace: ((message: string) => void) | undefined;

  constructor(options: SimDeviceOptions = {}) {
    const profile = typeof options.profile === 'object' ? options.profile : profileAt(options.profile ?? 0);
    const serialno = options.serialno ?? options.props?.['ro.serialno'] ?? randomSerialno();
    this.state = new DeviceState({ ...defaultProperties(profile, serialno), ...options.props }, options.bootId);
    this.services = options.services ?? defaultServices();
    this.features = new Set(options.features ?? IMPLEMENTED_FEATURES);
    this.maxPayload = options.maxPayload ?? MAX_PAYLOAD;
    const debug = process.env['DEVSIM_DEBUG'];
    this.log = options.log ?? (debug ? (message) => process.stderr.write(`[devsim ${this.serialno}] ${message}\n`) : () => {});
    this.trace = options.trace ?? (debug === 'packets' ? this.log : undefined);
  }

  get serialno(): string {
    return this.state.props.get('ro.serialno') ?? '';
  }

  get model(): string {
    return this.state.props.get('ro.product.model') ?? '';
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

  /** Port being listened on, if listening. */
  get port(): number | undefined {
    return this.server ? this.listenPort : undefined;
  }

  /** Connections from the adb server that completed the CNXN handshake. */
  get onlineConnections(): number {
    return [...this.connections].filter((connection) => connection.online).length;
  }

  /** The CNXN banner, from current properties and features. */
  banner(): string {
    const props = this.state.props;
    return formatBanner({
      productName: props.get('ro.product.name') ?? '',
      model: props.get('ro.product.model') ?? '',
      device: props.get('ro.product.device') ?? '',
      features: [...this.features],
    });
  }

  /**
   * Starts accepting adb connections; resolves to the port. Port 0 picks a
   * free port, re-picking if the OS hands out one in the emulator range.
   */
  async listen(host = '127.0.0.1', port = 0): Promise<number> {
    if (this.server) throw new Error(`device ${this.serialno} is already listening on port ${this.listenPort}`);
    if (port !== 0 && isReservedPort(port)) throw new Error(`port ${port} is reserved (adb server or emulator range 5555-5585)`);
    for (let attempt = 0; attempt < MAX_PORT_ATTEMPTS; attempt++) {
      const server = createServer((socket) => this.accept(socket));
      const bound = await listenOn(server, host, port);
      if (port === 0 && isReservedPort(bound)) {
        await closeServer(server);
        continue;
      }
      this.server = server;
      this.listenPort = bound;
      this.state.props.set('service.adb.tcp.port', String(bound));
      this.log(`listening on ${host}:${bound}`);
      return bound;
    }
    throw new Error('could not get a port outside the adb emulator range');
  }

  /** Vanishes: drops every connection at once and stops listening. */
  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    const connections = [...this.connections];
    for (const connection of connections) connection.destroy();
    await Promise.all([server ? closeServer(server) : undefined, ...connections.map((connection) => connection.closed)]);
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
      log: this.log,
      trace: this.trace,
    };
    const connection = new DeviceConnection(socket, host);
    this.connections.add(connection);
    void connection.closed.then(() => this.connections.delete(connection));
  }
}

function listenOn(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => {
      server.off('error', reject);
      const address = server.address();
      if (address && typeof address === 'object') resolve(address.port);
      else reject(new Error('server has no TCP address'));
    });
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

