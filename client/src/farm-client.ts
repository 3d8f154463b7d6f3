import { create } from "@bufbuild/protobuf";
import { randomUUID } from "node:crypto";
import { Errors } from "@farm/shared/error-codes";
import { LeaseSelectorSchema, type LeaseSelector } from "@farm/shared/gen/farm/v1/lease_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { SessionService, type Session as SessionMessage, type SessionStep } from "@farm/shared/gen/farm/v1/session_service_pb";
import type { ClientConfig } from "./config.js";
import { resolveConnection, type ConnectOptions } from "./connect.js";
import { Device } from "./device.js";
import { asyncDispose } from "./dispose-symbol.js";
import { FarmError } from "./farm-error.js";
import { Lease } from "./lease.js";
import { acquireWithTicket } from "./lease-acquire.js";
import { endSessionCall, listSessionsCall, sessionStepsCall, startSessionCall, type SessionEnd, type SessionFilter } from "./session-calls.js";
import { Session } from "./session.js";
import { Recording, recordingStateOf, type RecordingState } from "./recording.js";
import { VideoService } from "@farm/shared/gen/farm/v1/video_service_pb";
import { allPages } from "./all-pages.js";
import { validateSessionId } from "@farm/shared/video-options";
import { openStepRecorder, type StepRecorder } from "./session-steps.js";
import type { StartSessionOptions } from "./lease.js";
import { validateContext } from "@farm/shared/evidence-options";
import type { JsonObject } from "@bufbuild/protobuf";
import { farmCall, farmStream, toFarmError } from "./to-farm-error.js";
import type { ReadSessionImageResponse } from "@farm/shared/gen/farm/v1/session_service_pb";
import { EvidenceService, type PullEvidenceResponse } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { Wire, type CallScope } from "./wire.js";
import { pullBundle, type TransferStart } from "./evidence-pull.js";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { validateOutputDir } from "@farm/shared/evidence-options";
import { join } from "node:path";

/** Which phone a lease may be: every given field must match (as `farm lease acquire`'s flags). */
export interface PhoneSelector {
  /** The adb serial on its agent. */
  serial?: string | undefined;
  /** The physical id, or a unique prefix of it. */
  physicalId?: string | undefined;
  labels?: Record<string, string> | undefined;
  model?: string | undefined;
  apiLevel?: { min?: number; max?: number } | undefined;
  /** Agent name or id. */
  agent?: string | undefined;
}

export interface AcquireOptions extends PhoneSelector {
  /** How long to wait for a matching phone that is busy or offline (default 0: answer at once). No phone that could ever match fails at once, NO_DEVICE_MATCHES. */
  waitMs?: number | undefined;
  /** The lease's time to live (default: the coordinator's); renew() extends it. */
  ttlMs?: number | undefined;
  /** Cancels the wait: LEASE_WAIT_CANCELLED, nothing leased or queued. */
  signal?: AbortSignal | undefined;
}

export interface FarmClientOptions extends ConnectOptions {
  /** The deadline of each call that does not give its own (default 30000 ms). */
  timeoutMs?: number | undefined;
}

const DEFAULT_TIMEOUT_MS = 30_000;

function nonNegativeInt(v: number | undefined, field: string, max: number): number {
  if (v === undefined) return 0;
  if (!Number.isInteger(v) || v < 0 || v > max) throw new FarmError(Errors.INVALID_ARGUMENT, `${field} must be an integer in 0..${max}, got ${String(v)}`, field);
  return v;
}

function selectorOf(s: PhoneSelector): LeaseSelector {
  for (const [k, v] of Object.entries(s.labels ?? {})) {
    if (k === "" || typeof v !== "string") throw new FarmError(Errors.INVALID_ARGUMENT, `labels are non-empty keys with string values, got ${JSON.stringify(k)}`, "labels");
  }
  return create(LeaseSelectorSchema, {
    serial: s.serial ?? "",
    physicalId: s.physicalId ?? "",
    labels: s.labels ?? {},
    model: s.model ?? "",
    apiLevelMin: nonNegativeInt(s.apiLevel?.min, "apiLevel.min", 1000),
    apiLevelMax: nonNegativeInt(s.apiLevel?.max, "apiLevel.max", 1000),
    agent: s.agent ?? "",
  });
}

/**
 * A farm client for test code: one connection to the coordinator (one
 * kept HTTP/2 session) for every call, resolved from options, environment
 * and config file as the `farm` CLI resolves them. Close it with close()
 * or the end of an `await using` scope.
 */
export class FarmClient {
  readonly #wire: Wire;

  constructor(wire: Wire) {
    this.#wire = wire;
  }

  /** The resolved connection: coordinator URL and where it came from, where the token came from (never the token). */
  get connection(): Pick<ClientConfig, "coordinator" | "coordinatorSource" | "tokenSource" | "caFile" | "insecure"> {
    const c = this.#wire.config;
    return { coordinator: c.coordinator, coordinatorSource: c.coordinatorSource, tokenSource: c.tokenSource, caFile: c.caFile, insecure: c.insecure };
  }

  /** Leases a phone that matches; waits up to waitMs for one that is busy or offline. */
  acquire(opts: AcquireOptions = {}): Promise<Lease> {
    return farmCall(async () => {
      const selector = selectorOf(opts);
      const waitMs = nonNegativeInt(opts.waitMs, "waitMs", 24 * 3_600_000);
      const ttlMs = nonNegativeInt(opts.ttlMs, "ttlMs", 24 * 3_600_000);
      const stopped = () => new FarmError(Errors.LEASE_WAIT_CANCELLED, "the wait for a device was cancelled; nothing is leased or queued", undefined, null);
      const { lease, token } = await acquireWithTicket(this.#wire.client(LeaseService), { selector, waitMs, ttlMs, ticket: randomUUID(), deadline: Date.now() + waitMs }, { signal: opts.signal, stopped });
      return new Lease(this.#wire, lease, token);
    });
  }

  /**
   * A phone by serial, acting under a lease token held elsewhere (FARM_LEASE
   * of `farm lease run`) or none (reads of a phone nobody leased); in a
   * session, with the evidence each step records (capture, logPackage,
   * logFilter: the CLI's --capture, --log-package, --log-filter).
   */
  device(serial: string, opts: CallScope & { agent?: string | undefined } = {}): Device {
    const { agent, ...scope } = opts;
    return new Device(this.#wire, serial, agent ?? "", scope);
  }

  /**
   * A stored evidence bundle (a capture, a recording, an exported session)
   * written into `outputDir`, a new directory (as `farm evidence pull`),
   * each file checked against the manifest as it arrives. A leased phone's
   * bundle is its holder's: pass the lease (token) to read it.
   */
  pullEvidence(
    evidenceId: string,
    outputDir: string,
    opts: Pick<CallScope, "lease" | "session"> & { timeoutMs?: number | undefined; signal?: AbortSignal | undefined; onDownload?: TransferStart | undefined } = {},
  ): Promise<{ evidenceId: string; status: string; manifest: EvidenceManifest; manifestPath: string }> {
    return farmCall(async () => {
      const dir = validateOutputDir(outputDir);
      const { lease, session, ...call } = opts;
      const manifest = await pullBundle(this.#wire, { lease, session }, evidenceId, dir, call);
      return { evidenceId, status: manifest.status, manifest, manifestPath: join(dir, "manifest.json") };
    });
  }

  /**
   * Starts a recorded session on a phone leased elsewhere (the lease token
   * of `farm lease acquire` or FARM_LEASE), as `farm session start`; a
   * Lease's own startSession() needs no token. `policyJson` is a capture
   * policy document (checked by the coordinator), with its `secrets`.
   */
  startSession(
    serial: string,
    opts: StartSessionOptions & {
      lease?: string | undefined;
      agent?: string | undefined;
      policyJson?: string | undefined;
      secrets?: { name: string; value: string }[] | undefined;
      signal?: AbortSignal | undefined;
    } = {},
  ): Promise<Session> {
    return farmCall(async () => {
      const context = validateContext(JSON.stringify(opts.context ?? {})) as JsonObject;
      const device = this.device(serial, { lease: opts.lease, agent: opts.agent });
      const info = await startSessionCall(
        this.#wire.client(SessionService),
        { serial, agent: opts.agent },
        { name: opts.name, context, ocr: opts.ocr, policyJson: opts.policyJson, secrets: opts.secrets },
        this.#wire.options({ lease: opts.lease }, opts),
      );
      return new Session(this.#wire, info, device);
    });
  }

  /** Ends a session by id as passed or failed (its owner or an admin); the session as it ended. */
  endSession(sessionId: string, status: SessionEnd, opts: { timeoutMs?: number | undefined } = {}): Promise<SessionMessage | undefined> {
    return farmCall(() => endSessionCall(this.#wire.client(SessionService), sessionId, status, this.#wire.options({}, opts)));
  }

  /** The sessions that match `filter` (all pages), as `farm session list`. */
  sessions(filter: SessionFilter = {}, opts: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {}): Promise<SessionMessage[]> {
    return farmCall(() => listSessionsCall(this.#wire.client(SessionService), filter, this.#wire.options({}, opts)));
  }

  /**
   * A recorder for steps the caller makes itself (a check, a wait) in a
   * running session on the phone `serial`, as `farm wait` and `farm assert
   * visual` record theirs: SESSION_NOT_FOUND, SESSION_ENDED or
   * SESSION_MISMATCH when it cannot take them. `source` names where the
   * session id came from in those messages.
   */
  stepRecorder(sessionId: string, serial: string, opts: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined; source?: string | undefined } = {}): Promise<StepRecorder> {
    return farmCall(() => openStepRecorder(this.#wire, sessionId, serial, opts));
  }

  /**
   * A screen recording by id (`farm evidence video status|stop|release|inspect
   * --recording ID`), started here or elsewhere: its status(), stop(),
   * release() and inspect(). Pass the lease (token) to act under it.
   */
  recording(recordingId: string, opts: Pick<CallScope, "lease"> = {}): Recording {
    try {
      validateSessionId(recordingId);
    } catch (err) {
      throw toFarmError(err);
    }
    return new Recording(this.#wire, { lease: opts.lease }, recordingId);
  }

  /** The recordings that match (newest first, all pages), as `farm evidence video list`. */
  recordings(filter: { serial?: string | undefined; status?: string | undefined } = {}, opts: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {}): Promise<RecordingState[]> {
    return farmCall(async () => {
      const client = this.#wire.client(VideoService);
      const request = { serial: filter.serial ?? "", status: filter.status ?? "" };
      const rows = await allPages(async (page) => {
        const res = await client.listVideoSessions({ ...request, ...page }, this.#wire.options({}, opts));
        return { items: res.sessions, nextPageToken: res.nextPageToken };
      });
      return rows.map(recordingStateOf);
    });
  }

  /**
   * One of a session's stored screenshots (or other step files) by sha256,
   * as it arrives: the first message carries the size, then the bytes in
   * chunks (`farm session export` writes and checks them).
   */
  sessionImage(sessionId: string, sha256: string, opts: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {}): AsyncIterable<ReadSessionImageResponse> {
    return farmStream(() => this.#wire.client(SessionService).readSessionImage({ sessionId, sha256 }, this.#wire.options({}, opts)));
  }

  /**
   * A stored evidence bundle as it arrives: each file's header (path, size,
   * sha256) and chunks, then the manifest. pullEvidence() writes and checks
   * a whole bundle; this is for taking one file out of it.
   */
  evidenceStream(evidenceId: string, opts: Pick<CallScope, "lease"> & { timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {}): AsyncIterable<PullEvidenceResponse> {
    const { lease, ...call } = opts;
    return farmStream(() => this.#wire.client(EvidenceService).pullEvidence({ evidenceId }, this.#wire.options({ lease }, call)));
  }

  /** A session by id, with its step count and status. */
  session(sessionId: string, opts: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {}): Promise<SessionMessage | undefined> {
    return farmCall(async () => (await this.#wire.client(SessionService).getSession({ sessionId }, this.#wire.options({}, opts))).session);
  }

  /** A session's timeline, oldest step first (all pages). */
  sessionSteps(sessionId: string, opts: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {}): Promise<SessionStep[]> {
    return farmCall(() => sessionStepsCall(this.#wire.client(SessionService), sessionId, this.#wire.options({}, opts)));
  }

  get closed(): boolean {
    return this.#wire.closed;
  }

  /** Closes the connection; calls still open end with it. A lease not released expires at its ttl. */
  close(): void {
    this.#wire.close();
  }

  async [asyncDispose](): Promise<void> {
    this.close();
  }
}

/** A FarmClient on one connection, resolved like the CLI (options > environment > config file > local standalone). */
export async function connect(opts: FarmClientOptions = {}): Promise<FarmClient> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > 3_600_000) throw new FarmError(Errors.INVALID_ARGUMENT, `timeoutMs must be an integer in 100..3600000, got ${String(timeoutMs)}`, "timeoutMs");
  const config = resolveConnection(opts);
  try {
    return new FarmClient(new Wire(config, timeoutMs));
  } catch (err) {
    throw toFarmError(err);
  }
}
