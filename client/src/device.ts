import { create } from "@bufbuild/protobuf";
import { checkShellCommand } from "@farm/shared/command-limits";
import { Errors } from "@farm/shared/error-codes";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { validateAppPackage, validateContext, validateLabel, validateOutputDir, validateTimeout } from "@farm/shared/evidence-options";
import { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import {
  DeviceService,
  DeviceTargetSchema,
  SwipeSchema,
  TapSchema,
  type ActionRecord,
  type DeviceTarget,
  type Ownership,
  type GetUiTreeResponse,
  type ResolvedElement,
  type SendInputRequest,
  type SendInputResponse,
} from "@farm/shared/gen/farm/v1/device_service_pb";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { FARM_VERSION } from "@farm/shared/version";
import { existsSync } from "node:fs";
import { rm, rmdir } from "node:fs/promises";
import { join } from "node:path";
import { checkDeviceFilePath, DEVICE_FILE_MAX_BYTES } from "@farm/shared/device-files";
import { LogcatService } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import { readBlobBytes, type BlobReadTerms } from "./blob-bytes.js";
import { blobParts, downloadFile, uploadFile } from "./blob-files.js";
import { Recording, recordingStateOf, VIDEO_START_RPC_MS } from "./recording.js";
import { claimBundleDir } from "./bundle-writer.js";
import { ShellService } from "@farm/shared/gen/farm/v1/shell_service_pb";
import { ShellSession, shellStart, type OpenShellOptions } from "./shell-session.js";
import { VideoService } from "@farm/shared/gen/farm/v1/video_service_pb";
import { parseVideoSize, validateDurationSeconds } from "@farm/shared/video-options";
import { logcatFilter, logcatLines, type LogcatLine, type LogcatOptions } from "./logcat-lines.js";
import { pullBundle, type TransferStart } from "./evidence-pull.js";
import { elementSelectorOf, type ElementBy } from "./element-selector.js";
import { FarmError } from "./farm-error.js";
import type { StepShot } from "./session-steps.js";
import { farmCall, toFarmError } from "./to-farm-error.js";
import type { CallScope, Wire } from "./wire.js";

/** What a device action did: its journal entry and whether it reached the phone (null: unknown). */
export interface ActionResult {
  actionId: string;
  dispatched: boolean | null;
  ambiguous: boolean;
}

export interface ShellResult extends ActionResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export interface TapResult extends ActionResult {
  /** For a tap by element: the element it resolved to and the point tapped. */
  element?: ResolvedElement | undefined;
}

export interface Screenshot {
  /** The PNG, as the agent verified it and checked here against its sha256. */
  png: Buffer;
  width: number;
  height: number;
  sha256: string;
}

export interface CaptureOptions {
  /** At most 2048 UTF-16 units; "" is a valid label. */
  label?: string | undefined;
  /** A JSON object, at most 16 KiB as UTF-8. */
  context?: Record<string, unknown> | undefined;
  /** Device-work budget, 1000..120000 ms (default 30000). */
  timeoutMs?: number | undefined;
  /** Take the hierarchy from this app's SDK endpoint instead of UIAutomator. */
  appPackage?: string | undefined;
  /** Also write the bundle here: a new absolute directory whose parent exists. */
  outputDir?: string | undefined;
}

export interface CaptureResult {
  evidenceId: string;
  /** "complete", "partial" or "failed" (the manifest's). */
  status: string;
  manifest: EvidenceManifest;
  /** The bundle's manifest.json when outputDir was given. */
  manifestPath: string | null;
}

/** Per-call options every device method takes. */
export interface CallOpts {
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
  /**
   * Makes a device change idempotent (the CLI's --request-id): a retry with
   * the same id gets the first call's answer instead of running again; the
   * same id with other content is IDEMPOTENCY_CONFLICT.
   */
  requestId?: string | undefined;
}

/** What an APK install reports as it goes: its upload, then the moment the phone starts installing. */
export interface InstallProgress {
  onUpload?: TransferStart | undefined;
  onInstalling?: (() => void | Promise<void>) | undefined;
}

export interface ScreenshotFile {
  file: string;
  width: number;
  height: number;
  /** The PNG's size and sha256 as the agent reported them (the file was checked against the sha256). */
  size: number;
  sha256: string;
}

export interface LogcatText {
  text: string;
  /** More lines matched than were kept. */
  truncated: boolean;
}

export interface InstallResult extends ActionResult {
  /** What `pm install` said, e.g. "Success". */
  output: string;
}

export interface PushResult extends ActionResult {
  /** The bytes now on the phone and their sha256, as the phone computed it. */
  size: number;
  sha256: string;
}

export interface PullResult {
  size: number;
  sha256: string;
}

/** Time for upload and transfer on top of a capture's device-work budget (as `farm evidence capture`). */
const TRANSFER_ALLOWANCE_MS = 60_000;
/** An install's least deadline, as `farm install`'s (pm install can be slow). */
const INSTALL_MIN_TIMEOUT_MS = 120_000;
/** The largest screenshot read into memory (the agent refuses larger PNGs). */
const SCREENSHOT_MAX_BYTES = 64 * 1024 * 1024;
const COORD_MAX = 99_999;
/** A screenshot's download gets at least this long: a transfer's time, not a tap's. */
const SCREENSHOT_DOWNLOAD_MIN_MS = 60_000;
/** How a screenshot read into memory fails: SCREENSHOT_TRANSFER_FAILED, SCREENSHOT_TOO_LARGE (as `farm assert visual` has always said). */
const SCREENSHOT_TERMS: BlobReadTerms = {
  transferFailed: Errors.SCREENSHOT_TRANSFER_FAILED,
  tooLarge: (size) => new FarmError(Errors.SCREENSHOT_TOO_LARGE, `the blob is ${size} bytes`, undefined, null),
  noun: "screenshot",
};

function coordinate(v: number, field: string): number {
  if (!Number.isInteger(v) || v < 0 || v > COORD_MAX) throw new FarmError(Errors.INVALID_ARGUMENT, `${field} must be an integer in 0..${COORD_MAX}, got ${String(v)}`, field);
  return v;
}

const outcomeOf = (r: { actionId: string; dispatched?: boolean | undefined; ambiguous: boolean }): ActionResult => ({ actionId: r.actionId, dispatched: r.dispatched ?? null, ambiguous: r.ambiguous });

/**
 * One phone, by serial (and agent), acting under a lease and, inside a
 * session, recording each action as a step. Every call goes over the
 * FarmClient's one connection; every failure is a FarmError.
 */
export class Device {
  readonly target: DeviceTarget;

  constructor(
    private readonly wire: Wire,
    readonly serial: string,
    readonly agent: string,
    private readonly scope: CallScope,
  ) {
    if (serial === "") throw new FarmError(Errors.INVALID_ARGUMENT, "a device serial is required", "serial");
    this.target = create(DeviceTargetSchema, { serial, agent });
  }

  /** The target of one call: with its request id, if it has one. */
  private targetFor(opts: CallOpts | undefined): DeviceTarget {
    return opts?.requestId ? create(DeviceTargetSchema, { serial: this.serial, agent: this.agent, requestId: opts.requestId }) : this.target;
  }

  /** The same phone, its actions recorded as steps of `sessionId`. */
  inSession(sessionId: string): Device {
    return new Device(this.wire, this.serial, this.agent, { ...this.scope, session: sessionId });
  }

  /** Runs `command` with the phone's `sh -c`; a non-zero exit is the result's exitCode, not an error. */
  shell(command: string, opts: CallOpts = {}): Promise<ShellResult> {
    return farmCall(async () => {
      checkShellCommand(command);
      const res = await this.wire.client(DeviceService).runShell({ target: this.targetFor(opts), command }, this.wire.options(this.scope, opts));
      return { ...outcomeOf(res), exitCode: res.exitCode, stdout: Buffer.from(res.stdout).toString("utf8"), stderr: Buffer.from(res.stderr).toString("utf8") };
    });
  }

  /** A tap at (x, y), or on the centre of the one element named by id, text or desc (read from the UI tree first). */
  tap(x: number, y: number, opts?: CallOpts): Promise<TapResult>;
  tap(element: ElementBy, opts?: CallOpts): Promise<TapResult>;
  tap(a: number | ElementBy, b?: number | CallOpts, c?: CallOpts): Promise<TapResult> {
    return farmCall(async () => {
      const byElement = typeof a === "object";
      const tap = byElement ? create(TapSchema, { element: elementSelectorOf(a) }) : create(TapSchema, { x: coordinate(a, "x"), y: coordinate(typeof b === "number" ? b : Number.NaN, "y") });
      const opts = (byElement ? b : c) as CallOpts | undefined;
      const res = await this.input({ case: "tap", value: tap }, opts);
      return { ...outcomeOf(res), element: res.element };
    });
  }

  swipe(from: { x: number; y: number }, to: { x: number; y: number }, opts: CallOpts & { durationMs?: number } = {}): Promise<ActionResult> {
    return farmCall(async () => {
      const value = create(SwipeSchema, { x1: coordinate(from.x, "x1"), y1: coordinate(from.y, "y1"), x2: coordinate(to.x, "x2"), y2: coordinate(to.y, "y2"), durationMs: coordinate(opts.durationMs ?? 0, "durationMs") });
      return outcomeOf(await this.input({ case: "swipe", value }, opts));
    });
  }

  /** Types text into the focused field. */
  type(text: string, opts: CallOpts = {}): Promise<ActionResult> {
    return farmCall(async () => {
      if (text === "") throw new FarmError(Errors.INVALID_ARGUMENT, "text must not be empty", "text");
      return outcomeOf(await this.input({ case: "text", value: text }, opts));
    });
  }

  /** A key event: an Android key code, by number or KEYCODE_* name. */
  key(code: string | number, opts: CallOpts = {}): Promise<ActionResult> {
    return farmCall(async () => {
      const value = String(code);
      if (!/^(\d{1,4}|KEYCODE_[A-Z0-9_]+)$/.test(value)) throw new FarmError(Errors.INVALID_ARGUMENT, `key must be a key code number or a KEYCODE_* name, got "${value}"`, "key");
      return outcomeOf(await this.input({ case: "key", value }, opts));
    });
  }

  /**
   * One input event as built by the caller (a tap, swipe, text or key
   * message), checked only by the coordinator and the agent: tap, swipe,
   * type and key check their arguments here first.
   */
  sendInput(kind: SendInputRequest["kind"], opts: CallOpts = {}): Promise<SendInputResponse> {
    return farmCall(() => this.input(kind, opts));
  }

  private input(kind: SendInputRequest["kind"], opts: CallOpts = {}) {
    return this.wire.client(DeviceService).sendInput({ target: this.targetFor(opts), kind }, this.wire.options(this.scope, opts));
  }

  /**
   * Who holds the phone and its change journal (`farm device ownership
   * status`): the lock, the changes waiting for it, and the actions whose
   * outcome is not known (unresolved) or recent.
   */
  ownership(opts: CallOpts = {}): Promise<Ownership | undefined> {
    return farmCall(async () => (await this.wire.client(DeviceService).getOwnership({ target: this.targetFor(opts) }, this.wire.options(this.scope, opts))).ownership);
  }

  /** Settles what the phone can prove of unresolved actions (`farm device ownership reconcile`); the rest stays unresolved. */
  reconcileOwnership(opts: CallOpts = {}): Promise<{ settled: ActionRecord[]; unresolved: ActionRecord[] }> {
    return farmCall(async () => {
      const res = await this.wire.client(DeviceService).reconcileOwnership({ target: this.targetFor(opts) }, this.wire.options(this.scope, opts));
      return { settled: res.settled, unresolved: res.unresolved };
    });
  }

  /** One journaled action with its output (`farm device ownership receipt`), for its lease holder; undefined when the journal has none. */
  actionReceipt(actionId: string, opts: CallOpts = {}): Promise<ActionRecord | undefined> {
    return farmCall(async () => (await this.wire.client(DeviceService).getActionReceipt({ target: this.targetFor(opts), actionId }, this.wire.options(this.scope, opts))).action);
  }

  /** Accepts an action's unknown outcome, with why (`farm device ownership abandon`): the holder for its own phone, an admin for any. */
  abandonAction(actionId: string, reason: string, opts: CallOpts = {}): Promise<ActionRecord | undefined> {
    return farmCall(async () => (await this.wire.client(DeviceService).abandonAction({ target: this.targetFor(opts), actionId, reason }, this.wire.options(this.scope, opts))).action);
  }

  /** Pins the phone's physical identity to `label` ("" removes the pin; admin): its physical id from then on. */
  pinIdentity(label: string, opts: CallOpts = {}): Promise<{ physicalId: string }> {
    return farmCall(async () => ({ physicalId: (await this.wire.client(DeviceService).pinIdentity({ target: this.targetFor(opts), label }, this.wire.options(this.scope, opts))).physicalId }));
  }

  /** The phone's system properties (getprop), as the agent read them. */
  properties(opts: CallOpts = {}): Promise<Record<string, string>> {
    return farmCall(async () => (await this.wire.client(DeviceService).getProperties({ target: this.targetFor(opts) }, this.wire.options(this.scope, opts))).properties);
  }

  /** Sets a system property (setprop): a journaled device change. */
  setProperty(key: string, value: string, opts: CallOpts = {}): Promise<ActionResult> {
    return farmCall(async () => outcomeOf(await this.wire.client(DeviceService).setProperty({ target: this.targetFor(opts), key, value }, this.wire.options(this.scope, opts))));
  }

  /** Reboots the phone: a journaled device change; the phone is offline for a while after. */
  reboot(opts: CallOpts = {}): Promise<ActionResult> {
    return farmCall(async () => outcomeOf(await this.wire.client(DeviceService).reboot({ target: this.targetFor(opts) }, this.wire.options(this.scope, opts))));
  }

  /**
   * The phone's log as text, once (as `farm logcat`): the last `lines`
   * lines, or those since `since` (logcat's -T time); logcat() follows it live.
   */
  readLogcat(read: { lines?: number | undefined; since?: string | undefined } = {}, opts: CallOpts = {}): Promise<LogcatText> {
    return farmCall(async () => {
      const res = await this.wire.client(DeviceService).readLogcat({ target: this.targetFor(opts), lines: read.lines ?? 0, since: read.since ?? "" }, this.wire.options(this.scope, opts));
      return { text: res.text, truncated: res.truncated };
    });
  }

  /** The screen as a PNG in memory (fetched over the same connection, checked against its sha256). */
  screenshot(opts: CallOpts = {}): Promise<Screenshot> {
    return farmCall(async () => {
      const shot = await this.wire.client(DeviceService).takeScreenshot({ target: this.targetFor(opts) }, this.wire.options(this.scope, opts));
      const download = this.wire.options(this.scope, { ...opts, timeoutMs: Math.max(opts.timeoutMs ?? this.wire.timeoutMs, SCREENSHOT_DOWNLOAD_MIN_MS) });
      const { bytes, sha256 } = await readBlobBytes(blobParts(this.wire.client(BlobService), shot.blobId, download), SCREENSHOT_MAX_BYTES, SCREENSHOT_TERMS);
      if (sha256 !== shot.sha256) throw new FarmError(Errors.EVIDENCE_TRANSFER_FAILED, `the screenshot's sha256 ${sha256} is not the one the agent reported (${shot.sha256})`, undefined, null);
      return { png: bytes, width: shot.width, height: shot.height, sha256 };
    });
  }

  /**
   * The screen for a step the caller records itself (StepRecorder): a
   * screenshot that is not a step of its own (take it from a Device
   * outside the session), or the error that kept it from being taken. Only
   * a stop is thrown: `signal` aborted, or the connection's stop signal (the
   * CLI's SIGINT/SIGTERM).
   */
  async stepShot(opts: CallOpts = {}): Promise<StepShot> {
    const capturedAt = Date.now();
    try {
      const { png, sha256 } = await this.screenshot(opts);
      return { bytes: png, sha256, capturedAt };
    } catch (err) {
      if (opts.signal?.aborted || this.wire.config.stopSignal?.aborted) throw err;
      const e = toFarmError(err);
      return { errorCode: e.code, errorMessage: e.message.slice(0, 1000), capturedAt };
    }
  }

  /**
   * The screen as a PNG written to `file` (a new file, 0600, written
   * atomically) as `farm screenshot` does, checked against the sha256 the
   * agent reported. The transfer has no deadline of its own (its size sets
   * its time): `signal` stops it. `onDownload` gives the meter its bytes are
   * counted on.
   */
  screenshotToFile(file: string, opts: CallOpts & { onDownload?: TransferStart | undefined } = {}): Promise<ScreenshotFile> {
    return farmCall(async () => {
      if (existsSync(file)) throw new FarmError(Errors.EVIDENCE_OUTPUT_EXISTS, `${file} already exists`, "file");
      const shot = await this.wire.client(DeviceService).takeScreenshot({ target: this.targetFor(opts) }, this.wire.options(this.scope, opts));
      const call = { ...this.wire.options(this.scope, opts), timeoutMs: undefined };
      const got = await downloadFile(this.wire.client(BlobService), shot.blobId, file, { meter: await opts.onDownload?.(), maxBytes: SCREENSHOT_MAX_BYTES, call });
      if (got.sha256 !== shot.sha256) {
        await rm(file, { force: true });
        throw new FarmError(Errors.EVIDENCE_TRANSFER_FAILED, `the screenshot's sha256 ${got.sha256} is not the one the agent reported (${shot.sha256})`, undefined, null);
      }
      return { file, width: shot.width, height: shot.height, size: Number(shot.size), sha256: shot.sha256 };
    });
  }

  /** The screen's elements (UIAutomator, or the app's SDK with appPackage). */
  uiTree(opts: CallOpts & { appPackage?: string } = {}): Promise<GetUiTreeResponse> {
    return farmCall(() => this.wire.client(DeviceService).getUiTree({ target: this.targetFor(opts), appPackage: opts.appPackage ?? "" }, this.wire.options(this.scope, opts)));
  }

  /**
   * A still evidence bundle (screenshot, UI hierarchy, metadata), kept on
   * the coordinator and, with outputDir, written there. A partial or failed
   * capture is a result with its status (the manifest lists the errors),
   * not an error. In a session the still is attached to its timeline.
   */
  captureEvidence(opts: CaptureOptions & { onDownload?: TransferStart | undefined; signal?: AbortSignal | undefined } = {}): Promise<CaptureResult> {
    return farmCall(async () => {
      // Every rule is checked before the phone, the coordinator or a file is touched.
      const label = validateLabel(opts.label);
      const context = validateContext(JSON.stringify(opts.context ?? {}));
      const timeoutMs = validateTimeout(opts.timeoutMs);
      const appPackage = validateAppPackage(opts.appPackage);
      const outputDir = opts.outputDir === undefined ? undefined : validateOutputDir(opts.outputDir);
      const client = this.wire.client(EvidenceService);
      const res = await client.captureEvidence(
        { target: this.target, ...(label === null ? {} : { label }), contextJson: JSON.stringify(context), timeoutMs, appPackage, cliVersion: FARM_VERSION },
        this.wire.options(this.scope, { timeoutMs: timeoutMs + TRANSFER_ALLOWANCE_MS, signal: opts.signal }),
      );
      let manifest = JSON.parse(res.manifestJson) as EvidenceManifest;
      let manifestPath: string | null = null;
      if (outputDir) {
        manifest = await pullBundle(this.wire, this.scope, res.evidenceId, outputDir, { timeoutMs: TRANSFER_ALLOWANCE_MS, signal: opts.signal, onDownload: opts.onDownload });
        manifestPath = join(outputDir, "manifest.json");
      }
      return { evidenceId: res.evidenceId, status: manifest.status, manifest, manifestPath };
    });
  }

  /**
   * Installs an APK (a local path or its bytes) as `farm install` does: the
   * APK goes to the coordinator's blob store (sha256 checked there and on the
   * agent), then the journaled, routed InstallApp. A refused APK is
   * INSTALL_FAILED with the outcome.
   */
  install(apk: string | Uint8Array, opts: CallOpts & { progress?: InstallProgress | undefined } = {}): Promise<InstallResult> {
    return farmCall(async () => {
      // The upload has no deadline of its own (an APK's size sets its time, as `farm install`'s): `signal` stops it.
      const upload = { ...this.wire.options(this.scope, opts), timeoutMs: undefined };
      const blobId = await uploadFile(this.wire.client(BlobService), apk, { meter: await opts.progress?.onUpload?.(), call: upload });
      await opts.progress?.onInstalling?.();
      const timeoutMs = opts.timeoutMs ?? Math.max(this.wire.timeoutMs, INSTALL_MIN_TIMEOUT_MS);
      const res = await this.wire.client(DeviceService).installApp({ target: this.targetFor(opts), blobId }, this.wire.options(this.scope, { ...opts, timeoutMs }));
      return { ...outcomeOf(res), output: res.output };
    });
  }

  /**
   * Puts a file (a local path or bytes) at `remotePath` on the phone (under
   * /sdcard/Download/). The path and the size (at most 256 MiB) are checked
   * before a byte of the file is read.
   */
  push(local: string | Uint8Array, remotePath: string, opts: CallOpts = {}): Promise<PushResult> {
    return farmCall(async () => {
      const path = checkDeviceFilePath(remotePath);
      const blobId = await uploadFile(this.wire.client(BlobService), local, { maxBytes: DEVICE_FILE_MAX_BYTES, call: this.wire.options(this.scope, { ...opts, timeoutMs: opts.timeoutMs ?? TRANSFER_ALLOWANCE_MS }) });
      // The agent fetches the blob and pushes it to the phone within this call: a transfer's time, not a tap's.
      const res = await this.wire.client(DeviceService).pushFile({ target: this.targetFor(opts), blobId, path }, this.wire.options(this.scope, { ...opts, timeoutMs: opts.timeoutMs ?? Math.max(this.wire.timeoutMs, TRANSFER_ALLOWANCE_MS) }));
      return { ...outcomeOf(res), size: Number(res.size), sha256: res.sha256 };
    });
  }

  /** A file from the phone (under /sdcard/Download/): its bytes, or written to `localPath` (a new file, 0600). */
  pull(remotePath: string, opts?: CallOpts): Promise<PullResult & { bytes: Buffer }>;
  pull(remotePath: string, localPath: string, opts?: CallOpts): Promise<PullResult & { file: string }>;
  pull(remotePath: string, b?: string | CallOpts, c?: CallOpts): Promise<PullResult & ({ bytes: Buffer } | { file: string })> {
    return farmCall(async () => {
      const path = checkDeviceFilePath(remotePath);
      const localPath = typeof b === "string" ? b : undefined;
      const opts = (typeof b === "string" ? c : b) ?? {};
      if (localPath !== undefined && existsSync(localPath)) throw new FarmError(Errors.EVIDENCE_OUTPUT_EXISTS, `${localPath} already exists`, "localPath");
      const res = await this.wire.client(DeviceService).pullFile({ target: this.target, path }, this.wire.options(this.scope, { ...opts, timeoutMs: opts.timeoutMs ?? Math.max(this.wire.timeoutMs, TRANSFER_ALLOWANCE_MS) }));
      const size = Number(res.size);
      if (size > DEVICE_FILE_MAX_BYTES) throw new FarmError(Errors.FILE_TOO_LARGE, `${path} is ${size} bytes; files pulled are at most ${DEVICE_FILE_MAX_BYTES}`, "path", null);
      const blobs = this.wire.client(BlobService);
      const call = this.wire.options(this.scope, { ...opts, timeoutMs: opts.timeoutMs ?? TRANSFER_ALLOWANCE_MS });
      const damaged = (sha256: string) => new FarmError(Errors.EVIDENCE_TRANSFER_FAILED, `the pulled file's sha256 ${sha256} is not the one the phone reported (${res.sha256})`, undefined, null);
      if (localPath !== undefined) {
        const got = await downloadFile(blobs, res.blobId, localPath, { maxBytes: size, call });
        if (got.sha256 !== res.sha256) {
          await rm(localPath, { force: true });
          throw damaged(got.sha256);
        }
        return { file: localPath, size: got.size, sha256: got.sha256 };
      }
      const { bytes, sha256 } = await readBlobBytes(blobParts(blobs, res.blobId, call), size);
      if (sha256 !== res.sha256) throw damaged(sha256);
      return { bytes, size: bytes.length, sha256 };
    });
  }

  /**
   * An interactive shell on the phone (`farm shell` with no command), for
   * any terminal: write() keys in, iterate output() for what the phone's
   * terminal prints, resize() when the window changes, then exitCode().
   * The bad sizes are refused here; the stream has no deadline (a shell
   * lasts as long as it is used): close() or `signal` ends it.
   *
   *   const sh = d.openShell({ size: { rows: 40, cols: 120 } });
   *   sh.write("echo hi; exit 3\r");
   *   for await (const bytes of sh.output()) process.stdout.write(bytes);
   *   sh.exitCode(); // 3
   */
  openShell(opts: CallOpts & OpenShellOptions = {}): ShellSession {
    const start = shellStart(this.targetFor(opts), opts);
    const call = { ...this.wire.options(this.scope, opts), timeoutMs: undefined };
    const client = this.wire.client(ShellService);
    return new ShellSession((requests) => client.openShell(requests, call), start);
  }

  /**
   * The phone's log, live (LogcatService.WatchLogcat, as the dashboard's
   * Logs tab): first the newest lines the coordinator keeps (up to 500),
   * then each new line. Ends when `signal` aborts, the loop breaks, the
   * lease ends (LEASE_RELEASED / LEASE_EXPIRED) or the phone's stream ends.
   * Lines are read as the loop asks for them: a slow loop holds one batch,
   * and the coordinator drops lines for it (counted in `droppedBefore`).
   */
  logcat(opts: LogcatOptions & { signal?: AbortSignal | undefined } = {}): AsyncIterable<LogcatLine> {
    // Checked here, before the stream is opened: bad options throw at the call, not at the first read.
    const filter = logcatFilter(opts);
    const { signal } = opts;
    const call = { ...this.wire.options(this.scope, { signal }), timeoutMs: undefined };
    const stream = () => this.wire.client(LogcatService).watchLogcat({ target: this.target }, call);
    return logcatLines(stream, filter, signal);
  }

  /**
   * Starts a screen recording (as `farm evidence video start`): at most
   * durationSeconds (1..180), the size "WIDTHxHEIGHT" or the default. Its
   * bundle is evidence like captureEvidence's; stop() ends it. With
   * outputDir (a new absolute directory, as `farm evidence video start
   * DIR`), the directory is made before the start (and removed again if
   * the start is refused), holds the active manifest while recording, and
   * the finished bundle once status() or stop() sees it stored.
   */
  recordVideo(opts: CallOpts & { durationSeconds: number; size?: string | undefined; label?: string | undefined; context?: Record<string, unknown> | undefined; outputDir?: string | undefined }): Promise<Recording> {
    return farmCall(async () => {
      // Every rule is checked before the phone, the coordinator or a file is touched.
      const durationSeconds = validateDurationSeconds(opts.durationSeconds);
      parseVideoSize(opts.size);
      const label = validateLabel(opts.label);
      const context = validateContext(JSON.stringify(opts.context ?? {}));
      const outputDir = opts.outputDir === undefined ? null : validateOutputDir(opts.outputDir);
      if (outputDir) await claimBundleDir(outputDir);
      let res;
      try {
        res = await this.wire.client(VideoService).startVideo(
          { target: this.target, durationSeconds, size: opts.size ?? "", ...(label === null ? {} : { label }), contextJson: JSON.stringify(context), cliVersion: FARM_VERSION },
          this.wire.options(this.scope, { ...opts, timeoutMs: opts.timeoutMs ?? Math.max(this.wire.timeoutMs, VIDEO_START_RPC_MS) }),
        );
      } catch (err) {
        // Refused before anything was recorded: the claimed directory is still empty.
        if (outputDir) await rmdir(outputDir).catch(() => undefined);
        throw err;
      }
      const started = recordingStateOf(res.session);
      const rec = new Recording(this.wire, this.scope, started.recordingId, started, outputDir);
      if (outputDir) await rec.updateBundle(outputDir, started);
      return rec;
    });
  }
}
