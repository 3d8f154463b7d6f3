import { Errors, type ErrorReport } from "@farm/shared/error-codes";
import type { ClientConfig } from "./config.js";
import { serveTunnel, type ConnectResult, type ServeOutcome } from "./adb/tunnel-serve.js";
import { asyncDispose } from "./dispose-symbol.js";
import { FarmError } from "./farm-error.js";
import { toFarmError } from "./to-farm-error.js";

export interface RemoteAdbOptions {
  /** Local port of the adb endpoint: 0 (default) for any free one. */
  port?: number | undefined;
  /** The local adb server's port (ANDROID_ADB_SERVER_PORT; adb's default 5037 when unset). */
  adbServerPort?: number | undefined;
  /** The deadline of each step of setting up (opening the tunnel, the first stream); default 30000. */
  timeoutMs?: number | undefined;
  /** Where the tunnel's state file goes (FARM_HOME / XDG), and ADB_SERVER_SOCKET; default process.env. */
  env?: NodeJS.ProcessEnv | undefined;
  /** The tunnel's log lines (none by default). */
  log?: ((line: string) => void) | undefined;
}

/**
 * A leased phone on the local adb server as `127.0.0.1:PORT`, served from
 * this process like `farm adb connect --foreground`: its streams are
 * tunnelled to exactly the leased serial, and it closes when the lease ends
 * (or close() is called, or the scope of an `await using` ends); the adb
 * server then forgets the serial.
 */
export class RemoteAdb {
  #stop: AbortController;
  #served: Promise<ServeOutcome>;

  private constructor(
    readonly result: ConnectResult,
    stop: AbortController,
    served: Promise<ServeOutcome>,
  ) {
    this.#stop = stop;
    this.#served = served;
  }

  /** The local adb serial: 127.0.0.1:PORT (`adb -s SERIAL shell`). */
  get serial(): string {
    return this.result.serial;
  }

  get tunnelId(): string {
    return this.result.tunnel;
  }

  /** Resolves when the tunnel closes: with why, when the farm closed it (the lease ended, say); null when closed here. */
  get closed(): Promise<ErrorReport | null> {
    return this.#served.then((o) => o.reason ?? null);
  }

  /** Closes the tunnel, disconnects the serial from the local adb server; resolves once done. */
  async close(): Promise<void> {
    this.#stop.abort();
    await this.#served;
  }

  async [asyncDispose](): Promise<void> {
    await this.close();
  }

  /** Opens the tunnel and waits until the local adb server lists the phone. */
  static async open(config: ClientConfig, lease: { token: string; serial: string; agent: string }, opts: RemoteAdbOptions = {}): Promise<RemoteAdb> {
    const port = opts.port ?? 0;
    if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new FarmError(Errors.INVALID_ARGUMENT, `port must be an integer in 0..65535, got ${String(port)}`, "port");
    const env = opts.env ?? process.env;
    const stop = new AbortController();
    let ready: (r: ConnectResult) => void = () => undefined;
    const up = new Promise<ConnectResult>((resolve) => (ready = resolve));
    const served = serveTunnel({
      config,
      leaseToken: lease.token,
      serial: lease.serial,
      agent: lease.agent,
      port,
      adb: { serverPort: opts.adbServerPort, env },
      timeoutMs: opts.timeoutMs ?? 30_000,
      env,
      foreground: true,
      logFile: null,
      stopSignal: stop.signal,
      log: opts.log ?? (() => undefined),
      onReady: (r) => ready(r),
    });
    // Whichever comes first: the phone listed, or the tunnel failing (or closing) before that.
    const first = await Promise.race([up.then((r) => ({ r })), served.then((o) => ({ o }), (err: unknown) => ({ err }))]);
    if ("r" in first) {
      const result = first.r;
      // A failure after the phone was up is the tunnel's end, told by closed (never an unhandled rejection).
      return new RemoteAdb(result, stop, served.catch((err: unknown): ServeOutcome => ({ code: 1, result, reason: toFarmError(err).report() })));
    }
    if ("err" in first) throw toFarmError(first.err);
    const why = first.o.reason;
    throw new FarmError(Errors.TUNNEL_CLOSED, `the tunnel closed before the phone was up${why ? `: ${why.message}` : ""}`, undefined, null);
  }
}
