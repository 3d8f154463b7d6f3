import type { JsonObject } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { CallOptions } from "@connectrpc/connect";
import { Errors, type ErrorCode } from "@farm/shared/error-codes";
import { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { SessionService, SessionStatus, type Session as SessionMessage } from "@farm/shared/gen/farm/v1/session_service_pb";
import { uploadFile } from "./blob-files.js";
import { FarmError } from "./farm-error.js";
import { toFarmError } from "./to-farm-error.js";
import type { Wire } from "./wire.js";

/**
 * Steps the caller makes itself (a visual check, a wait for an element,
 * a harness's own assertion): the coordinator cannot watch them, so the
 * outcome is appended to the session (SessionService.AppendSessionStep)
 * with the files it produced uploaded as blobs first. `farm wait` and
 * `farm assert visual` record theirs this way.
 */

/** A file kept with a step (a baseline, a diff image, a diagnosis JSON). */
export interface StepFile {
  name: string;
  /** What it is, e.g. "visual" or "diagnosis". */
  kind: string;
  /** Who made it, e.g. "runner" or "agent". */
  provider: string;
  mimeType: string;
  /** Which of the step's moments it shows, e.g. "baseline", "actual", "diff"; "" for none. */
  when: string;
  bytes: Uint8Array;
}

/** A screenshot of a step: its PNG, or the error that kept it from being taken. */
export type StepShot = { bytes: Uint8Array; sha256: string; capturedAt: number } | { errorCode: string; errorMessage: string; capturedAt: number };

/** The kinds of step a caller may record itself (the coordinator refuses others). */
export const CLIENT_STEP_ACTIONS = ["assert-visual", "wait"] as const;
export type ClientStepAction = (typeof CLIENT_STEP_ACTIONS)[number];

/** One step the caller made, as the timeline keeps it. */
export interface ClientStep {
  /** The kind of check: the coordinator takes "wait" and "assert-visual" (as farm wait and farm assert visual record them). */
  action: ClientStepAction;
  description: string;
  arguments: JsonObject;
  ok: boolean;
  errorCode?: string | undefined;
  errorMessage?: string | undefined;
  response: JsonObject;
  files: readonly StepFile[];
  /** When it started (ms since the epoch) and how long it took. */
  startMs: number;
  durationMs: number;
  /** The screen when the step started and when it ended, as a routed step keeps them (Device.stepShot). */
  before: StepShot;
  after: StepShot;
}

/** What became of recording a step: its sequence, or the error that kept it out of the timeline. */
export type RecordedStep = { ok: true; sessionId: string; sequence: number } | { ok: false; sessionId: string; code: ErrorCode; message: string };

/** The least deadline of a step's uploads and append, whatever a short call deadline said. */
const APPEND_MIN_MS = 60_000;

/**
 * A running session that takes the caller's own steps, checked when it is
 * opened (FarmClient.stepRecorder): it exists, it runs, and it is on the
 * phone the steps are about.
 */
export class StepRecorder {
  constructor(
    private readonly wire: Wire,
    /** The session, as it was when the recorder was opened. */
    readonly info: SessionMessage,
    private readonly timeoutMs: number,
  ) {}

  get sessionId(): string {
    return this.info.sessionId;
  }

  /** The session's capture policy's sha256; "" without a policy. */
  get policySha256(): string {
    return this.info.policySha256 ?? "";
  }

  /** Appends the step (its files and screenshots uploaded first); resolves to its sequence number (0 when the coordinator did not say). */
  async append(step: ClientStep): Promise<number> {
    // Refused before a file is uploaded, as the coordinator would refuse it after.
    if (!(CLIENT_STEP_ACTIONS as readonly string[]).includes(step.action)) {
      throw new FarmError(Errors.INVALID_ARGUMENT, `a client step is one of ${CLIENT_STEP_ACTIONS.join(", ")}, got ${JSON.stringify(String(step.action).slice(0, 100))}`, "action");
    }
    const blobs = this.wire.client(BlobService);
    const call = this.wire.options({}, { timeoutMs: this.timeoutMs });
    const upload = (bytes: Uint8Array, name: string) => uploadFile(blobs, bytes, { name, call: { timeoutMs: this.timeoutMs } });
    const artifacts = [];
    for (const f of step.files) {
      const blobId = await upload(f.bytes, f.name);
      artifacts.push({ name: f.name, kind: f.kind, provider: f.provider, blobId, mimeType: f.mimeType, when: f.when });
    }
    const shotMessage = async (shot: StepShot) => {
      const captureTime = timestampFromMs(shot.capturedAt);
      if ("errorCode" in shot) return { errorCode: shot.errorCode, errorMessage: shot.errorMessage, captureTime };
      return { blobId: await upload(shot.bytes, "screen.png"), captureTime };
    };
    // The after screen is uploaded only when it differs from the before one: the same screen is named by its sha256.
    const before = await shotMessage(step.before);
    const after = "bytes" in step.after && "bytes" in step.before && step.after.sha256 === step.before.sha256 ? { sha256: step.after.sha256, captureTime: timestampFromMs(step.after.capturedAt) } : await shotMessage(step.after);
    const res = await this.wire.client(SessionService).appendSessionStep(
      {
        sessionId: this.sessionId,
        action: step.action,
        description: step.description,
        arguments: step.arguments,
        ok: step.ok,
        errorCode: step.errorCode ?? "",
        errorMessage: step.errorMessage ?? "",
        response: step.response,
        artifacts,
        startTime: timestampFromMs(step.startMs),
        durationMs: Math.max(0, Math.round(step.durationMs)),
        before,
        after,
      },
      call,
    );
    return res.step?.sequence ?? 0;
  }

  /** Appends the step; a failure is returned, not thrown, so the step's own outcome can still be reported. */
  async record(step: ClientStep): Promise<RecordedStep> {
    try {
      return { ok: true, sessionId: this.sessionId, sequence: await this.append(step) };
    } catch (err) {
      const e = toFarmError(err);
      return { ok: false, sessionId: this.sessionId, code: e.code, message: e.message };
    }
  }
}

/**
 * Opens a recorder on `sessionId` for steps about the phone `serial`:
 * SESSION_NOT_FOUND, SESSION_ENDED, or SESSION_MISMATCH (field "device")
 * when the session is on another phone (another serial of the same
 * physical phone is the same phone). `source` names where the id came
 * from in the messages (the CLI's "FARM_SESSION").
 */
export async function openStepRecorder(wire: Wire, sessionId: string, serial: string, opts: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined; source?: string | undefined } = {}): Promise<StepRecorder> {
  const call: CallOptions = wire.options({}, opts);
  const named = `session ${sessionId}${opts.source ? ` (${opts.source})` : ""}`;
  const s = (await wire.client(SessionService).getSession({ sessionId }, call)).session;
  if (!s) throw new FarmError(Errors.SESSION_NOT_FOUND, `${named} was not found`, "session");
  if (s.status !== SessionStatus.RUNNING) throw new FarmError(Errors.SESSION_ENDED, `${named} has ended; ${opts.source ? `unset ${opts.source} or ` : ""}start a new one`, "session");
  if (s.serial !== serial) {
    const same = await wire.client(RegistryService).listDevices({ physicalId: s.physicalId }, call);
    if (!same.devices.some((d) => d.serial === serial)) {
      throw new FarmError(Errors.SESSION_MISMATCH, `${named} is on phone ${s.serial} (${s.physicalId}); this command goes to ${serial}`, "device");
    }
  }
  return new StepRecorder(wire, s, Math.max(opts.timeoutMs ?? wire.timeoutMs, APPEND_MIN_MS));
}
