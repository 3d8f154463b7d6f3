import type { JsonObject } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { ErrorCode } from "@farm/shared/error-codes";
import { Errors } from "@farm/shared/errors";
import { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { DeviceService, type DeviceTarget } from "@farm/shared/gen/farm/v1/device_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { SessionService, SessionStatus } from "@farm/shared/gen/farm/v1/session_service_pb";
import { CliError } from "../cli-error.js";
import { cliErrorReport } from "../cli-error-report.js";
import { serviceClient } from "@farm/client/transport";
import type { ClientSession } from "../session.js";
import { downloadBytes, uploadBytes } from "./blobs.js";

/**
 * Steps the CLI makes itself (`farm assert visual`, `farm wait`): the
 * coordinator cannot watch them, so the outcome is appended to the session
 * (FARM_SESSION) with SessionService.AppendSessionStep, with the files it
 * produced uploaded as blobs first.
 */

export interface StepFile {
  name: string;
  kind: string;
  provider: string;
  mimeType: string;
  when: string;
  bytes: Uint8Array;
}

export interface ClientStep {
  action: "assert-visual" | "wait";
  description: string;
  arguments: JsonObject;
  ok: boolean;
  errorCode?: string;
  errorMessage?: string;
  response: JsonObject;
  files: readonly StepFile[];
  startMs: number;
  durationMs: number;
  /** The screen when the step started and when it ended, as a routed step keeps them. */
  before: StepShot;
  after: StepShot;
}

/** A screenshot of a client step: its PNG, or the error that kept it from being taken. */
export type StepShot = { bytes: Uint8Array; sha256: string; capturedAt: number } | { errorCode: string; errorMessage: string; capturedAt: number };

/**
 * Takes the device's screen for a client step (DeviceService.TakeScreenshot
 * without the session header: the screenshot is not a step of its own). A
 * failure is the shot's error, recorded as the step's missing screenshot;
 * only a stop of the command itself is thrown.
 */
export async function takeStepShot(session: ClientSession, target: DeviceTarget, lease: string | undefined, signal?: AbortSignal): Promise<StepShot> {
  const capturedAt = Date.now();
  const call = { timeoutMs: Math.max(session.timeoutMs, 30_000), ...(signal ? { signal } : {}) };
  try {
    const shot = await serviceClient(DeviceService, session.config, { lease: lease || undefined }).takeScreenshot({ target }, call);
    const { bytes, sha256 } = await downloadBytes(serviceClient(BlobService, session.config), shot.blobId, call);
    return { bytes, sha256, capturedAt };
  } catch (err) {
    if (signal?.aborted) throw err;
    const r = cliErrorReport(err);
    return { errorCode: r.code, errorMessage: r.message.slice(0, 1000), capturedAt };
  }
}

export interface SessionRecorder {
  sessionId: string;
  /** The session's capture policy's sha256; empty without a policy. */
  policySha256: string;
  /** Appends the step; resolves to its sequence number (0 when the coordinator did not say). */
  append(step: ClientStep): Promise<number>;
}

/**
 * The session named by FARM_SESSION, checked before any work, as the
 * coordinator checks the calls that are steps: it exists, it runs, and it
 * is on the phone the command goes to (`serial`, or another serial of the
 * same physical device). Undefined outside a session.
 */
export async function openSessionRecorder(env: NodeJS.ProcessEnv, session: ClientSession, serial: string, signal?: AbortSignal): Promise<SessionRecorder | undefined> {
  const sessionId = env["FARM_SESSION"] || "";
  if (!sessionId) return undefined;
  const call = { timeoutMs: session.timeoutMs, ...(signal ? { signal } : {}) };
  const sessions = serviceClient(SessionService, session.config);
  const got = await sessions.getSession({ sessionId }, call);
  const s = got.session;
  if (!s) throw new CliError(Errors.SESSION_NOT_FOUND, `session ${sessionId} (FARM_SESSION) was not found`, "session");
  if (s.status !== SessionStatus.RUNNING) throw new CliError(Errors.SESSION_ENDED, `session ${sessionId} (FARM_SESSION) has ended; unset FARM_SESSION or start a new one`, "session");
  if (s.serial !== serial) {
    const same = await serviceClient(RegistryService, session.config).listDevices({ physicalId: s.physicalId }, call);
    if (!same.devices.some((d) => d.serial === serial)) {
      throw new CliError(Errors.SESSION_MISMATCH, `session ${sessionId} (FARM_SESSION) is on phone ${s.serial} (${s.physicalId}); this command goes to ${serial}`, "device");
    }
  }
  const blobs = serviceClient(BlobService, session.config);
  // Uploads and the append get at least a minute, whatever a short --timeout said.
  const timeoutMs = Math.max(session.timeoutMs, 60_000);
  async function shotMessage(shot: StepShot) {
    const captureTime = timestampFromMs(shot.capturedAt);
    if ("errorCode" in shot) return { errorCode: shot.errorCode, errorMessage: shot.errorMessage, captureTime };
    return { blobId: await uploadBytes(blobs, shot.bytes, "screen.png", { timeoutMs }), captureTime };
  }
  return {
    sessionId,
    policySha256: s.policySha256 ?? "",
    async append(step) {
      const artifacts = [];
      for (const f of step.files) {
        const blobId = await uploadBytes(blobs, f.bytes, f.name, { timeoutMs });
        artifacts.push({ name: f.name, kind: f.kind, provider: f.provider, blobId, mimeType: f.mimeType, when: f.when });
      }
      // The after screen is uploaded only when it differs from the before one: the same screen is named by its sha256.
      const before = await shotMessage(step.before);
      const after = "bytes" in step.after && "bytes" in step.before && step.after.sha256 === step.before.sha256 ? { sha256: step.after.sha256, captureTime: timestampFromMs(step.after.capturedAt) } : await shotMessage(step.after);
      const res = await sessions.appendSessionStep(
        {
          sessionId,
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
        { timeoutMs },
      );
      return res.step?.sequence ?? 0;
    },
  };
}

/** What became of recording a step: its sequence, or the error that kept it out of the timeline. */
export type Recorded = { ok: true; sessionId: string; sequence: number } | { ok: false; sessionId: string; code: ErrorCode; message: string };

/** Appends the step; a failure is returned (not thrown), so the check's own result is still printed. */
export async function recordStep(recorder: SessionRecorder, step: ClientStep): Promise<Recorded> {
  try {
    return { ok: true, sessionId: recorder.sessionId, sequence: await recorder.append(step) };
  } catch (err) {
    const r = cliErrorReport(err);
    return { ok: false, sessionId: recorder.sessionId, code: r.code, message: r.message };
  }
}
