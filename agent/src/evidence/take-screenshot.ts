import { Errors, farmError } from "@farm/shared/errors";
import { execOut } from "../adb/adb-exec.js";
import { putBlobBytes } from "../uplink/blob-transfer.js";
import type { DeviceOwnership } from "../ownership/device-ownership.js";
import { checkPng, PNG_MAX_BYTES } from "./png-check.js";
import type { EvidenceDeps } from "./capture-command.js";

/** `screencap -p` of a phone this agent owns, by `deadlineMs`: the bytes as the phone sent them (not yet checked). */
export async function screencap(serial: string, deadlineMs: number, deps: { ownership: DeviceOwnership; evidence: EvidenceDeps }): Promise<Buffer> {
  deps.ownership.requireDevice(serial);
  const left = Math.ceil(deadlineMs - Date.now());
  if (left <= 0) throw farmError(Errors.COMMAND_TIMEOUT, "no time was left for the screenshot");
  const shot = await execOut(deps.evidence.adb, serial, "screencap -p", { signal: AbortSignal.timeout(left), maxBytes: PNG_MAX_BYTES });
  if (shot.error) throw farmError(shot.error.code === "DEADLINE_EXCEEDED" ? Errors.COMMAND_TIMEOUT : Errors.SCREENSHOT_TRANSFER_FAILED, `screenshot failed: ${shot.error.message}`);
  return shot.bytes;
}

/** A verified screenshot, handed over through the blob store (not the control stream). */
export async function takeScreenshot(serial: string, deadlineMs: number, deps: { ownership: DeviceOwnership; evidence: EvidenceDeps }) {
  const shot = { bytes: await screencap(serial, Math.max(deadlineMs, Date.now() + 1), deps) };
  const check = await checkPng(shot.bytes);
  if (!check.ok) throw farmError(Errors[check.code], check.message);
  const blob = await putBlobBytes(deps.evidence.transport, deps.evidence.stagingDir, shot.bytes, "screenshot.png");
  return { blobId: blob.blobId, width: check.width, height: check.height, size: BigInt(blob.size), sha256: blob.sha256 };
}
