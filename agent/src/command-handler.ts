import { Code, ConnectError } from "@connectrpc/connect";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { actionError, Errors, farmError, toErrorReport } from "@farm/shared/errors";
import { toCommandError } from "@farm/shared/command-error";
import { checkPropValue, checkShellCommand } from "@farm/shared/command-limits";
import { withoutHostPaths } from "@farm/shared/host-paths";
import { tmpdir } from "node:os";
import type { Logger } from "@farm/shared/log";
import { CommandResultSchema, type AgentCommand, type CommandResult } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { DeviceTarget, SendInputRequest } from "@farm/shared/gen/farm/v1/device_service_pb";
import { shellV2 } from "./adb-shell.js";
import { parseGetprop } from "./evidence/device-observations.js";
import { shQuote } from "./actions/shell-quote.js";
import type { InputRequest } from "./actions/input-action.js";
import type { InteractiveShellRequest } from "./actions/interactive-shell-action.js";
import type { InstallRequest } from "./actions/install-action.js";
import { randomUUID } from "node:crypto";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { execOut } from "./adb-exec.js";
import { checkPng, PNG_MAX_BYTES } from "./evidence/png-check.js";
import { putBlob } from "./blob-transfer.js";
import { DeviceOwnership, toRecord, type ActionKind } from "./device-ownership.js";
import type { DeviceWatcher } from "./device-watcher.js";
import type { PinStore } from "./pin-store.js";
import type { DeviceHistory } from "./device-history.js";
import type { ShellOutput, ShellRequest } from "./actions/shell-action.js";
import type { SetPropRequest } from "./actions/setprop-action.js";
import { captureEvidence, type EvidenceDeps } from "./evidence/capture-command.js";
import type { VideoSessions } from "./video/video-sessions.js";
import { removeAndroidForward } from "./app-sdk/android-endpoint.js";
import { appEndpoint } from "./app-sdk/app-endpoint-command.js";
import type { IosDevices } from "./ios/ios-devices.js";

export interface CommandHandlerDeps {
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
  hostPaths?: string[];
}

/** Failures of this host rather than of the request: logged at error level where they happen. */
const hostFailureCodes = new Set<string>([Errors.INTERNAL.code]);
const hostFailureGrpc = new Set<Code>([Code.Internal, Code.DataLoss, Code.Unknown, Code.ResourceExhausted]);

/** While draining, only what finishes or reports on existing work is taken. */
const allowedWhileDraining = new Set<AgentCommand["kind"]["case"]>(["videoStatus", "stopVideo", "inspectVideo", "getOwnership", "getActionReceipt", "drain"]);

/** Commands that change a device: every answer says whether they were dispatched. */
const mutationCommands = new Set<AgentCommand["kind"]["case"]>(["runShell", "setProperty", "sendInput", "reboot", "installApp", "openShell"]);

const propKey = /^[A-Za-z0-9_.-]{1,255}$/;

/** Runs one routed command and always answers with a CommandResult. */
export async function handleCommand(cmd: AgentCommand, deps: CommandHandlerDeps): Promise<CommandResult> {
  const result = (kind: MessageInitShape<typeof CommandResultSchema>["kind"]) => create(CommandResultSchema, { commandId: cmd.commandId, kind });
  try {
    const draining = deps.drainReason();
    if (draining && !allowedWhileDraining.has(cmd.kind.case)) {
      throw actionError(Errors.AGENT_DRAINING, `agent is draining (${draining}) and takes no new work`, { dispatched: false, ambiguous: false });
    }
    const deadlineMs = Number(cmd.deadlineUnixMs) || Date.now() + 30_000;
    const kinds = new Map<string, ActionKind<never, unknown>>([
      [deps.shell.kind, deps.shell as ActionKind<never, unknown>],
      [deps.setProp.kind, deps.setProp as ActionKind<never, unknown>],
      [deps.input.kind, deps.input as ActionKind<never, unknown>],
      [deps.reboot.kind, deps.reboot as ActionKind<never, unknown>],
      [deps.install.kind, deps.install as ActionKind<never, unknown>],
    ]);
    const ctx = (target: DeviceTarget | undefined) => ({ serial: serialOf(target), deadlineMs, requestedBy: cmd.requestedBy });
    switch (cmd.kind.case) {
      case "getOwnership":
        return result({ case: "getOwnership", value: { ownership: deps.ownership.status(serialOf(cmd.kind.value.target)) } });
      case "reconcileOwnership": {
        const serial = serialOf(cmd.kind.value.target);
        const r = await deps.ownership.reconcile(serial, kinds, deadlineMs);
        return result({
          case: "reconcileOwnership",
          value: { settled: r.settled.map(toRecord), unresolved: r.unresolved.map(toRecord), ownership: deps.ownership.status(serial) },
        });
      }
      case "getActionReceipt": {
        const v = cmd.kind.value;
        return result({ case: "getActionReceipt", value: { action: toRecord(deps.ownership.receipt(serialOf(v.target), v.actionId)) } });
      }
      case "abandonAction": {
        const v = cmd.kind.value;
        if (!cmd.requestedByAdmin) throw farmError(Errors.PERMISSION_DENIED, "abandoning an action needs an admin user token");
        const serial = serialOf(v.target);
        const action = deps.ownership.abandon(serial, v.actionId, v.reason, cmd.requestedBy);
        deps.history.record({ physicalId: action.physicalId, serial, kind: "action-abandoned", detail: `${action.actionId} by ${cmd.requestedBy}: ${v.reason}` });
        deps.log.warn("unresolved action abandoned by an operator", { actionId: action.actionId, by: cmd.requestedBy, reason: v.reason });
        return result({ case: "abandonAction", value: { action: toRecord(action) } });
      }
      case "runShell": {
        const v = cmd.kind.value;
        checkShellCommand(v.command);
        const { action, result: out } = await deps.ownership.run(deps.shell, { command: v.command }, ctx(v.target));
        return result({
          case: "runShell",
          value: { actionId: action.actionId, exitCode: out.exitCode, stdout: out.stdout, stderr: out.stderr, dispatched: true, ambiguous: false },
        });
      }
      case "setProperty": {
        const v = cmd.kind.value;
        if (!propKey.test(v.key)) throw farmError(Errors.INVALID_ARGUMENT, "property key must be 1-255 of A-Z a-z 0-9 _ . -", "key");
        checkPropValue(v.value);
        const { action } = await deps.ownership.run(deps.setProp, { key: v.key, value: v.value }, ctx(v.target));
        return result({ case: "setProperty", value: { actionId: action.actionId, dispatched: true, ambiguous: false } });
      }
      case "pinIdentity": {
        const v = cmd.kind.value;
        if (!cmd.requestedByAdmin) throw farmError(Errors.PERMISSION_DENIED, "pinning an identity needs an admin user token");
        if (!/^[A-Za-z0-9._-]{0,64}$/.test(v.label)) throw farmError(Errors.INVALID_ARGUMENT, "label must be up to 64 of A-Z a-z 0-9 . _ -", "label");
        const serial = serialOf(v.target);
        deps.pins.set(serial, v.label);
        deps.watcher.refreshIdentities();
        const d = deps.watcher.device(serial);
        return result({ case: "pinIdentity", value: { physicalId: d?.identity.physicalId ?? "" } });
      }
      case "getProperties": {
        const serial = serialOf(cmd.kind.value.target);
        deps.ownership.requireDevice(serial);
        const r = await shellV2(deps.evidence.adb, serial, "getprop", AbortSignal.timeout(Math.max(1, deadlineMs - Date.now())));
        return result({ case: "getProperties", value: { properties: parseGetprop(r.stdout.toString("utf8")) } });
      }
      case "readLogcat": {
        const v = cmd.kind.value;
        const serial = serialOf(v.target);
        deps.ownership.requireDevice(serial);
        const lines = v.lines || 500;
        if (lines > 10_000) throw farmError(Errors.INVALID_ARGUMENT, "lines must be 1..10000", "lines");
        if (v.since && !/^[0-9: .-]{5,32}$/.test(v.since)) throw farmError(Errors.INVALID_ARGUMENT, "since must be a logcat time like '11-30 06:00:00.000'", "since");
        const command = v.since ? `logcat -d -v threadtime -T ${shQuote(v.since)}` : `logcat -d -v threadtime -t ${lines}`;
        const r = await shellV2(deps.evidence.adb, serial, command, AbortSignal.timeout(Math.max(1, deadlineMs - Date.now())));
        return result({ case: "readLogcat", value: { text: r.stdout.toString("utf8"), truncated: r.truncated } });
      }
      case "sendInput": {
        const v = cmd.kind.value;
        const { action } = await deps.ownership.run(deps.input, toInput(v), ctx(v.target));
        return result({ case: "sendInput", value: { actionId: action.actionId, dispatched: true, ambiguous: false } });
      }
      case "reboot": {
        const v = cmd.kind.value;
        const { action } = await deps.ownership.run(deps.reboot, {}, ctx(v.target));
        return result({ case: "reboot", value: { actionId: action.actionId, dispatched: true, ambiguous: false } });
      }
      case "openShell": {
        const v = cmd.kind.value;
        let started!: (id: string) => void;
        const startedPromise = new Promise<string>((resolve) => (started = resolve));
        // The session outlives this command: it runs until the terminal exits.
        const session = deps.ownership.run(
          deps.interactiveShell,
          { command: v, onStarted: (id) => started(id) },
          { ...ctx(v.target), runDeadlineMs: Date.now() + 24 * 3_600_000 },
        );
        session.catch((err: unknown) => deps.log.warn("interactive shell ended with an error", { error: (err as Error).message }));
        const actionId = await Promise.race([startedPromise, session.then(() => { throw new Error("the shell ended before it started"); })]);
        return result({ case: "openShell", value: { actionId } });
      }
      case "takeScreenshot": {
        const serial = serialOf(cmd.kind.value.target);
        return result({ case: "takeScreenshot", value: await takeScreenshot(serial, deadlineMs, deps) });
      }
      case "installApp": {
        const v = cmd.kind.value;
        if (!/^[0-9a-f-]{36}$/.test(v.blobId)) throw farmError(Errors.INVALID_ARGUMENT, "a blob id from BlobService.UploadBlob is required", "blob_id");
        const { action, result: out } = await deps.ownership.run(deps.install, { blobId: v.blobId }, ctx(v.target));
        return result({ case: "installApp", value: { actionId: action.actionId, output: out.output, dispatched: true, ambiguous: false } });
      }
      case "captureEvidence":
        return result({ case: "captureEvidence", value: await captureEvidence(cmd.kind.value, cmd.commandId, deps.watcher, deps.evidence, deps.log) });
      case "drain":
        deps.onDrainRequested(cmd.kind.value.reason);
        return result({ case: "drain", value: {} });
      case "getAppEndpoint": {
        const v = cmd.kind.value;
        const serial = serialOf(v.target);
        return result({ case: "getAppEndpoint", value: { endpoint: await appEndpoint(serial, v.app, v.wdaRunner, deadlineMs, deps) } });
      }
      case "removeAppForward": {
        const v = cmd.kind.value;
        const serial = serialOf(v.target);
        deps.ownership.requireDevice(serial);
        await removeAndroidForward(deps.evidence.adb, serial, v.port);
        return result({ case: "removeAppForward", value: {} });
      }
      case "startVideo":
        return result({ case: "startVideo", value: { session: await deps.video.start(cmd.kind.value, deadlineMs) } });
      case "videoStatus":
        return result({ case: "videoStatus", value: { session: await deps.video.status(cmd.kind.value.sessionId) } });
      case "stopVideo":
        return result({ case: "stopVideo", value: { session: await deps.video.stop(cmd.kind.value.sessionId, cmd.requestedBy, deadlineMs) } });
      case "inspectVideo":
        return result({ case: "inspectVideo", value: await deps.video.inspect(cmd.kind.value.sessionId) });
      case "releaseVideo": {
        if (!cmd.requestedByAdmin) throw farmError(Errors.PERMISSION_DENIED, "releasing a recording lock needs an admin token");
        const v = cmd.kind.value;
        return result({ case: "releaseVideo", value: { session: await deps.video.release(v.sessionId, cmd.requestedBy, v.reason) } });
      }
      default:
        throw farmError(Errors.NOT_IMPLEMENTED, `this agent does not implement command ${cmd.kind.case ?? "(none)"}`);
    }
  } catch (err) {
    const report = toErrorReport(err);
    const status = ConnectError.from(err).code;
    if (hostFailureCodes.has(report.code) || hostFailureGrpc.has(status) || isStorageFailure(err)) {
      deps.log.error("command failed on this host", { command: cmd.kind.case, commandId: cmd.commandId, code: report.code, error: report.message });
    }
    report.message = withoutHostPaths(report.message, deps.hostPaths ?? [deps.evidence.stagingDir, tmpdir()]);
    // Every failure of a mutation that carries no outcome happened before
    // its journal entry (argument checks): nothing reached the device.
    if (mutationCommands.has(cmd.kind.case) && report.dispatched === undefined) {
      report.dispatched = false;
      report.ambiguous = false;
    }
    return result({ case: "error", value: toCommandError(report, err) });
  }
}

/** A file-system failure of this host (full disk, I/O error), whatever code it was reported under. */
function isStorageFailure(err: unknown): boolean {
  const code = (err as { code?: unknown; cause?: { code?: unknown } } | null)?.cause?.code ?? (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^E[A-Z]+$/.test(code);
}

/** A verified screenshot, handed over through the blob store (not the control stream). */
async function takeScreenshot(serial: string, deadlineMs: number, deps: CommandHandlerDeps) {
  deps.ownership.requireDevice(serial);
  const shot = await execOut(deps.evidence.adb, serial, "screencap -p", { signal: AbortSignal.timeout(Math.max(1, Math.ceil(deadlineMs - Date.now()))), maxBytes: PNG_MAX_BYTES });
  if (shot.error) throw farmError(shot.error.code === "DEADLINE_EXCEEDED" ? Errors.COMMAND_TIMEOUT : Errors.SCREENSHOT_TRANSFER_FAILED, `screenshot failed: ${shot.error.message}`);
  const check = await checkPng(shot.bytes);
  if (!check.ok) throw farmError(Errors[check.code], check.message);
  await mkdir(deps.evidence.stagingDir, { recursive: true, mode: 0o700 });
  const file = join(deps.evidence.stagingDir, `screenshot-${randomUUID()}.png`);
  try {
    await writeFile(file, shot.bytes, { mode: 0o600 });
    const blob = await putBlob(deps.evidence.transport, file, "screenshot.png");
    return { blobId: blob.blobId, width: check.width, height: check.height, size: BigInt(blob.size), sha256: blob.sha256 };
  } finally {
    await rm(file, { force: true });
  }
}

function toInput(v: SendInputRequest): InputRequest {
  switch (v.kind.case) {
    case "tap":
      return { kind: "tap", x: v.kind.value.x, y: v.kind.value.y };
    case "swipe": {
      const s = v.kind.value;
      return { kind: "swipe", x1: s.x1, y1: s.y1, x2: s.x2, y2: s.y2, durationMs: s.durationMs };
    }
    case "text":
      if (v.kind.value === "" || v.kind.value.length > 1000 || /[\n\0]/.test(v.kind.value)) throw farmError(Errors.INVALID_ARGUMENT, "text must be one line of 1..1000 characters", "text");
      return { kind: "text", text: v.kind.value };
    case "key":
      if (!/^(KEYCODE_[A-Z0-9_]+|\d{1,4})$/.test(v.kind.value)) throw farmError(Errors.INVALID_ARGUMENT, "key must be a key code number or a KEYCODE_* name", "key");
      return { kind: "key", key: v.kind.value };
    default:
      throw farmError(Errors.INVALID_ARGUMENT, "say tap, swipe, text or key", "input");
  }
}

function serialOf(target: DeviceTarget | undefined): string {
  if (!target?.serial) throw farmError(Errors.INVALID_ARGUMENT, "a device serial is required", "target.serial");
  return target.serial;
}
