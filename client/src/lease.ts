import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { JsonObject } from "@bufbuild/protobuf";
import { validateContext } from "@farm/shared/evidence-options";
import type { Lease as LeaseMessage } from "@farm/shared/gen/farm/v1/lease_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { SessionService } from "@farm/shared/gen/farm/v1/session_service_pb";
import { Device } from "./device.js";
import { asyncDispose } from "./dispose-symbol.js";
import { RemoteAdb, type RemoteAdbOptions } from "./remote-adb.js";
import { Session } from "./session.js";
import { startSessionCall } from "./session-calls.js";
import { farmCall } from "./to-farm-error.js";
import type { Wire } from "./wire.js";

export interface StartSessionOptions {
  name?: string | undefined;
  /** A JSON object recorded with the session, at most 16 KiB as UTF-8. */
  context?: Record<string, unknown> | undefined;
  /** OCR of each step's before screenshot. */
  ocr?: boolean | undefined;
  timeoutMs?: number | undefined;
}

/**
 * A granted lease: the phone is this holder's until release() (or the
 * end of an `await using` scope, also when the scope throws) or expiry.
 * `device` acts under the lease.
 */
export class Lease {
  readonly device: Device;
  #released: Promise<void> | undefined;

  constructor(
    private readonly wire: Wire,
    readonly info: LeaseMessage,
    /** The lease token (FARM_LEASE for a CLI run under this lease). */
    readonly token: string,
  ) {
    this.device = new Device(wire, info.serial, info.agentId, { lease: token });
  }

  get leaseId(): string {
    return this.info.leaseId;
  }

  /** The physical device: the phone, whichever serial it shows. */
  get physicalId(): string {
    return this.info.physicalId;
  }

  get serial(): string {
    return this.info.serial;
  }

  get expiresAt(): Date | undefined {
    return this.info.expireTime ? new Date(timestampMs(this.info.expireTime)) : undefined;
  }

  get released(): boolean {
    return this.#released !== undefined;
  }

  /** Extends the lease by ttlMs (default: its own ttl). */
  renew(opts: { ttlMs?: number; timeoutMs?: number } = {}): Promise<LeaseMessage | undefined> {
    return farmCall(async () => (await this.wire.client(LeaseService).renewLease({ token: this.token, ttlMs: opts.ttlMs ?? 0 }, this.wire.options({}, opts))).lease);
  }

  /** Gives the phone back (once; later calls wait for the same release). A session still running ends as lease-ended. */
  release(opts: { timeoutMs?: number } = {}): Promise<void> {
    this.#released ??= farmCall(async () => {
      await this.wire.client(LeaseService).releaseLease({ token: this.token }, this.wire.options({}, opts));
    });
    return this.#released;
  }

  async [asyncDispose](): Promise<void> {
    await this.release();
  }

  /** Starts a recorded session on the leased phone; its `device` records each action as a step. */
  startSession(opts: StartSessionOptions = {}): Promise<Session> {
    return farmCall(async () => {
      const context = validateContext(JSON.stringify(opts.context ?? {})) as JsonObject;
      const info = await startSessionCall(this.wire.client(SessionService), { serial: this.info.serial, agent: this.info.agentId }, { name: opts.name, context, ocr: opts.ocr }, this.wire.options({ lease: this.token }, opts));
      return new Session(this.wire, info, this.device);
    });
  }

  /** The leased phone on the local adb server (`farm adb connect`), served from this process. */
  adbConnect(opts: RemoteAdbOptions = {}): Promise<RemoteAdb> {
    return RemoteAdb.open(this.wire.config, { token: this.token, serial: this.info.serial, agent: this.info.agentId }, opts);
  }
}
