import type { Device } from "@farm/client/device";
import type { FarmClient } from "@farm/client/farm-client";
import type { RecordedStep, StepRecorder, StepShot } from "@farm/client/session-steps";
import { asCli } from "../commands/device-target.js";

/**
 * Steps the CLI makes itself (`farm assert visual`, `farm wait`): the
 * coordinator cannot watch them, so the outcome is appended to the session
 * (FARM_SESSION) by @farm/client's StepRecorder, with the files it produced
 * uploaded first. The run's stop signal (in the connection's config) ends
 * every call; it is not passed per call, so a stop reads as it always did.
 */

export type { ClientStep, StepFile, StepShot } from "@farm/client/session-steps";
export type Recorded = RecordedStep;
export type SessionRecorder = StepRecorder;

/** The least deadline of a step's screenshot. */
const SHOT_MIN_MS = 30_000;

/**
 * The device's screen for a client step: a screenshot that is not a step
 * of its own (`device` carries no session), or the error that kept it from
 * being taken, recorded as the step's missing screenshot. Only a stop of
 * the command is thrown.
 */
export function takeStepShot(device: Device, timeoutMs: number): Promise<StepShot> {
  return asCli(device.stepShot({ timeoutMs: Math.max(timeoutMs, SHOT_MIN_MS) }));
}

/**
 * The session named by FARM_SESSION, checked before any work, as the
 * coordinator checks the calls that are steps: it exists, it runs, and it
 * is on the phone the command goes to (`serial`, or another serial of the
 * same physical device). Undefined outside a session.
 */
export async function openSessionRecorder(env: NodeJS.ProcessEnv, farm: FarmClient, serial: string, timeoutMs: number): Promise<SessionRecorder | undefined> {
  const sessionId = env["FARM_SESSION"] || "";
  if (!sessionId) return undefined;
  return asCli(farm.stepRecorder(sessionId, serial, { timeoutMs, source: "FARM_SESSION" }));
}

/** Appends the step; a failure is returned (not thrown), so the check's own result is still printed. */
export function recordStep(recorder: SessionRecorder, step: Parameters<SessionRecorder["record"]>[0]): Promise<Recorded> {
  return recorder.record(step);
}
