import type { Logger } from "@farm/shared/log";
import type { DeviceOwnership, ActionKind } from "../ownership/device-ownership.js";
import type { DeviceWatcher } from "../devices/device-watcher.js";
import type { PinStore } from "../devices/pin-store.js";
import type { DeviceHistory } from "../devices/device-history.js";
import type { ShellOutput, ShellRequest } from "../actions/shell-action.js";
import type { SetPropRequest } from "../actions/setprop-action.js";
import type { InputRequest } from "../actions/input-action.js";
import type { InteractiveShellRequest } from "../actions/interactive-shell-action.js";
import type { InstallRequest } from "../actions/install-action.js";
import type { PushFileRequest, PushFileResult } from "../actions/push-file-action.js";
import type { EvidenceDeps } from "../evidence/capture-command.js";
import type { VideoSessions } from "../video/video-sessions.js";
import type { IosDevices } from "../ios/ios-devices.js";
import type { AdbTunnels } from "../adb-tunnel/adb-tunnels.js";
import type { RawAdbRequest, RawAdbResult } from "../adb-tunnel/raw-adb-action.js";
import type { LiveScreens } from "../live-screen/live-screens.js";
import type { LiveLogcats } from "../live-logcat/live-logcats.js";
import type { Baseline, CleanRequest, StepOutcome } from "../cleanup/phone-cleanup.js";

/** What the agent's services work with. */
export interface AgentServiceDeps {
  ownership: DeviceOwnership;
  watcher: DeviceWatcher;
  pins: PinStore;
  history: DeviceHistory;
  shell: ActionKind<ShellRequest, ShellOutput>;
  setProp: ActionKind<SetPropRequest, Record<string, never>>;
  input: ActionKind<InputRequest, Record<string, never>>;
  reboot: ActionKind<Record<string, never>, Record<string, never>>;
  interactiveShell: ActionKind<InteractiveShellRequest, { exitCode: number }>;
  install: ActionKind<InstallRequest, { output: string }>;
  pushFile: ActionKind<PushFileRequest, PushFileResult>;
  /** Remote adb tunnels open on this agent, and the action that holds a phone for one. */
  adbTunnels: AdbTunnels;
  rawAdb: ActionKind<RawAdbRequest, RawAdbResult>;
  /** The cleanup of a phone whose lease ended, and the baseline it diffs against. */
  cleanup: ActionKind<CleanRequest, { steps: StepOutcome[] }>;
  readBaseline(serial: string, dirs: readonly string[], signal: AbortSignal): Promise<Baseline>;
  /** Live screens this agent streams to the coordinator. */
  screens: LiveScreens;
  /** Live logcats this agent streams to the coordinator. */
  logcats: LiveLogcats;
  log: Logger;
  evidence: EvidenceDeps;
  video: VideoSessions;
  /** Non-empty while draining: new work is refused. */
  drainReason(): string;
  /** The coordinator asked this agent to drain (farm agent drain). */
  onDrainRequested(reason: string): void;
  /** iOS devices through devicectl, when configured. */
  ios?: IosDevices;
  /** Host directories (data dir, lock dir) whose paths never reach a client. */
  hostPaths: string[];
}
