/**
 * @farm/client: the farm's calls for test code, over one connection.
 *
 *   await using farm = await connect();
 *   await using lease = await farm.acquire({ model: "Pixel 8", waitMs: 60_000 });
 *   await lease.device.tap({ text: "Next" });
 *
 * docs/client.md has the whole API and a vitest example.
 */
import "./dispose-symbol.js";

export { Errors, exitCodeFor, type ErrorCode } from "@farm/shared/error-codes";
export type { TransferProgress } from "./blob-files.js";
export { resolveConnection, type ConnectOptions } from "./connect.js";
export {
  Device,
  type ActionResult,
  type CallOpts,
  type CaptureOptions,
  type CaptureResult,
  type InstallProgress,
  type InstallResult,
  type LogcatText,
  type PullResult,
  type PushResult,
  type Screenshot,
  type ScreenshotFile,
  type ShellResult,
  type TapResult,
} from "./device.js";
export type { ElementBy } from "./element-selector.js";
export type { TransferStart } from "./evidence-pull.js";
export { connect, FarmClient, type AcquireOptions, type FarmClientOptions, type PhoneSelector } from "./farm-client.js";
export { FarmError } from "./farm-error.js";
export { Lease, type StartSessionOptions } from "./lease.js";
export type { LogcatLine, LogcatOptions } from "./logcat-lines.js";
export { Recording, type RecordingInspection, type RecordingState } from "./recording.js";
export { RemoteAdb, type RemoteAdbOptions } from "./remote-adb.js";
export type { SessionEnd, SessionFilter } from "./session-calls.js";
export { CLIENT_STEP_ACTIONS, StepRecorder, type ClientStep, type ClientStepAction, type RecordedStep, type StepFile, type StepShot } from "./session-steps.js";
export { Session } from "./session.js";
export { ShellSession, type OpenShellOptions, type TerminalSize } from "./shell-session.js";
