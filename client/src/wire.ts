import { createClient, createContextValues, type CallOptions, type Client, type Transport } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import { farmTransport } from "@farm/shared/farm-transport";
import { Errors } from "@farm/shared/error-codes";
import type { ClientConfig } from "./config.js";
import { FarmError } from "./farm-error.js";
import { CALLER_SIGNAL, clientInterceptors } from "./transport.js";

/**
 * What a call presents besides the token: the lease it acts under, the
 * session it is a step of, and (for a step) the evidence to record with it:
 * `capture` as the CLI's --capture (e.g. "screenshot.before,deviceLog"),
 * the device log narrowed to an app (logPackage) or a filter spec.
 */
export interface CallScope {
  lease?: string | undefined;
  session?: string | undefined;
  capture?: string | undefined;
  logPackage?: string | undefined;
  logFilter?: string | undefined;
}

/**
 * The library's one connection: a single farm transport (one kept HTTP/2
 * session, shared/src/farm-transport.ts) that every service client and
 * every call of a FarmClient uses. Lease and session ride per call as
 * headers, not per transport, so leasing a phone opens no new connection.
 */
export class Wire {
  readonly transport: Transport;
  #manager: Http2SessionManager | undefined;
  #clients = new Map<string, Client<DescService>>();
  #closed = false;

  constructor(
    readonly config: ClientConfig & { verbose?: boolean },
    /** The deadline of each call unless the call says otherwise. */
    readonly timeoutMs: number,
  ) {
    if (!config.token) throw new FarmError(Errors.UNAUTHENTICATED, "no token: pass token or tokenFile, set FARM_TOKEN, put a token in the config file, or run `farm standalone` locally", "token");
    this.transport = farmTransport({
      url: config.coordinator,
      token: config.token,
      caFile: config.caFile,
      insecure: config.insecure,
      interceptors: clientInterceptors(config),
      track: (m) => {
        this.#manager = m;
        config.connections?.track(m);
      },
    });
  }

  /** A client of one service on the one transport (made once per service). */
  client<S extends DescService>(service: S): Client<S> {
    if (this.#closed) throw new FarmError(Errors.CALL_CANCELLED, "this farm client is closed", undefined, null);
    let c = this.#clients.get(service.typeName);
    if (!c) {
      c = createClient(service, this.transport) as unknown as Client<DescService>;
      this.#clients.set(service.typeName, c);
    }
    return c as unknown as Client<S>;
  }

  /** Call options: the deadline, the lease and session headers, the caller's signal. */
  options(scope: CallScope, opts: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {}): CallOptions {
    const headers: Record<string, string> = {
      ...(scope.lease ? { "x-farm-lease": scope.lease } : {}),
      ...(scope.session ? { "x-farm-session": scope.session } : {}),
      ...(scope.capture ? { "x-farm-capture": scope.capture } : {}),
      ...(scope.logPackage ? { "x-farm-log-package": scope.logPackage } : {}),
      ...(scope.logFilter ? { "x-farm-log-filter": scope.logFilter } : {}),
    };
    // The caller's signal rides to the transport's interceptor (abortedByCaller), which answers CALL_CANCELLED.
    return { timeoutMs: opts.timeoutMs ?? this.timeoutMs, headers, ...(opts.signal ? { contextValues: createContextValues().set(CALLER_SIGNAL, opts.signal) } : {}) };
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Closes the connection (and any stream still open on it). */
  close(): void {
    this.#closed = true;
    this.#manager?.abort();
  }
}
