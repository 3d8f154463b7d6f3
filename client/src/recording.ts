import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Errors } from "@farm/shared/error-codes";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { VideoService, type InspectVideoResponse, type VideoSession } from "@farm/shared/gen/farm/v1/video_service_pb";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { publishBundleFile, writePulledBundle } from "./bundle-writer.js";
import { FarmError } from "./farm-error.js";
import { farmCall } from "./to-farm-error.js";
import type { CallScope, Wire } from "./wire.js";

/** `farm evidence video`'s RPC budgets: the recorder's own start and stop budgets are fixed on the agent. */
export const VIDEO_START_RPC_MS = 30_000;
const STOP_RPC_MS = 80_000;
const TRANSFER_MS = 60_000;

/** A recording's state as the coordinator keeps it. */
export interface RecordingState {
  recordingId: string;
  /** "starting", "recording", "finalizing", "complete", "partial" or "failed". */
  status: string;
  /** The failure's code and message ("" while fine). */
  code: string;
  message: string;
  /** The bundle is in the coordinator's evidence store. */
  stored: boolean;
  /** The bundle's manifest as it stands (null before the agent wrote one). */
  manifest: EvidenceManifest | null;
  /** That manifest as the recorder persisted it ("" before it wrote one). */
  manifestJson: string;
  /** The phone: the serial it is recorded on, its physical id, and its agent (name, else id). */
  serial: string;
  physicalId: string;
  agent: string;
  /** False when the recorder's heartbeat is gone (or its agent is unreachable). */
  workerAvailable: boolean;
  /** "none", "recovery_required" (a recorder lost with the phone still held: releaseRecording) or "released". */
  recoveryState: string;
  /** While recording: when the phone's time limit ends it. */
  deadline: Date | null;
  createdAt: Date | null;
}

/** What `farm evidence video inspect` shows of a recording's worker, for an operator. */
export interface RecordingInspection {
  state: RecordingState | null;
  /** The worker's own files (JSON text as read, or why they could not be read). */
  sessionJson: string;
  heartbeatJson: string;
  lockJson: string;
  /** `ls -l` of the file on the phone, or why it could not be read. */
  remoteFile: string;
  /** ps lines naming it, or why they could not be read. */
  recorderProcesses: string;
  /** A live process matches the recorder's stored pid, command and start time. */
  recorderIdentityVerified: boolean;
}

const dateOf = (t: VideoSession["deadline"]) => (t ? new Date(timestampMs(t)) : null);

/** A recording's state from the coordinator's message. */
export function recordingStateOf(s: VideoSession | undefined): RecordingState {
  if (!s) throw new FarmError(Errors.INTERNAL, "the coordinator answered without the recording", undefined, null);
  return {
    recordingId: s.sessionId,
    status: s.status,
    code: s.code,
    message: s.message,
    stored: s.stored,
    manifest: s.manifestJson ? (JSON.parse(s.manifestJson) as EvidenceManifest) : null,
    manifestJson: s.manifestJson,
    serial: s.serial,
    physicalId: s.physicalId,
    agent: s.agentName || s.agentId,
    workerAvailable: s.workerAvailable,
    recoveryState: s.recoveryState,
    deadline: dateOf(s.deadline),
    createdAt: dateOf(s.createTime),
  };
}

type Call = { timeoutMs?: number | undefined; signal?: AbortSignal | undefined };

/**
 * A screen recording, started by Device.recordVideo or named by its id
 * (FarmClient.recording): its evidence id is recordingId. stop() ends it
 * and waits for its bundle.
 */
export class Recording {
  constructor(
    private readonly wire: Wire,
    private readonly scope: CallScope,
    readonly recordingId: string,
    /** The state the start answered with (null for a recording named by id). */
    readonly started: RecordingState | null = null,
    /** The bundle directory recordVideo({ outputDir }) began, kept up to date by status() and stop(). */
    readonly outputDir: string | null = null,
  ) {}

  /** The recording's state now; a bundle directory begun at the start is brought up to date. */
  status(opts: Call & { outputDir?: string | undefined } = {}): Promise<RecordingState> {
    return farmCall(async () => {
      const s = recordingStateOf((await this.wire.client(VideoService).getVideoStatus({ sessionId: this.recordingId }, this.wire.options(this.scope, opts))).session);
      const dir = opts.outputDir ?? this.outputDir;
      if (dir) await this.updateBundle(dir, s);
      return s;
    });
  }

  /**
   * Stops the recording and waits for its bundle. A recording that ended
   * badly is a state with its code (a failed capture is data, as
   * captureEvidence's), not a throw. The stored bundle is written into
   * `outputDir`, a new absolute directory, or (`bundleDir`) into the
   * directory recordVideo({ outputDir }) began.
   */
  stop(opts: Call & { outputDir?: string | undefined; bundleDir?: string | undefined } = {}): Promise<RecordingState & { manifestPath: string | null }> {
    return farmCall(async () => {
      const call = this.wire.options(this.scope, { ...opts, timeoutMs: opts.timeoutMs ?? Math.max(this.wire.timeoutMs, STOP_RPC_MS) });
      const s = recordingStateOf((await this.wire.client(VideoService).stopVideo({ sessionId: this.recordingId }, call)).session);
      const begun = opts.bundleDir ?? this.outputDir;
      if (begun) {
        await this.updateBundle(begun, s);
        return { ...s, manifestPath: join(begun, "manifest.json") };
      }
      if (opts.outputDir === undefined) return { ...s, manifestPath: null };
      if (!s.stored) throw new FarmError(Errors.EVIDENCE_CAPTURE_FAILED, `recording ${s.recordingId} is ${s.status} and its bundle is not stored: nothing to write to ${opts.outputDir}`, "outputDir", null);
      const manifest = await writePulledBundle({ dir: opts.outputDir, evidenceId: s.recordingId, claim: true }, this.pull(opts.signal));
      return { ...s, manifest, manifestPath: join(opts.outputDir, "manifest.json") };
    });
  }

  /**
   * Brings a bundle directory begun by recordVideo({ outputDir }) up to
   * date with `state`: the active manifest while recording, the verified
   * bundle from the store once it is stored. A finished bundle there is
   * never modified again.
   */
  updateBundle(dir: string, state: RecordingState, opts: { signal?: AbortSignal | undefined } = {}): Promise<void> {
    return farmCall(async () => {
      const current = await readFile(join(dir, "manifest.json"), "utf8").then((t) => JSON.parse(t) as EvidenceManifest, () => null);
      if (current?.finishedAt) return;
      if (state.stored) {
        await writePulledBundle({ dir, evidenceId: state.recordingId, claim: false }, this.pull(opts.signal));
      } else if (state.manifest && !state.manifest.finishedAt) {
        // Files come only with the finished bundle; until then just the manifest, as the recorder wrote it.
        await publishBundleFile(dir, "manifest.json", state.manifestJson).catch((err: unknown) => {
          throw new FarmError(Errors.EVIDENCE_CAPTURE_FAILED, `recording ${state.recordingId}: writing the active manifest into ${dir} failed: ${(err as Error).message}`, undefined, null);
        });
      }
    });
  }

  /**
   * Releases a recording whose recorder was lost (recoveryState
   * "recovery_required"), so its phone can record again; `released` is
   * false when there was nothing to release (a finished recording, or one
   * released before), and `note` says what was done or why not.
   */
  release(reason: string, opts: Call = {}): Promise<{ state: RecordingState; released: boolean; note: string }> {
    return farmCall(async () => {
      const res = await this.wire.client(VideoService).releaseVideo({ sessionId: this.recordingId, reason }, this.wire.options(this.scope, opts));
      return { state: recordingStateOf(res.session), released: res.released, note: res.note };
    });
  }

  /** The recorder's worker as its agent sees it (`farm evidence video inspect`): files, heartbeat, lock, the process on the phone. */
  inspect(opts: Call = {}): Promise<RecordingInspection> {
    return farmCall(async () => {
      const r: InspectVideoResponse = await this.wire.client(VideoService).inspectVideo({ sessionId: this.recordingId }, this.wire.options(this.scope, opts));
      return {
        state: r.session ? recordingStateOf(r.session) : null,
        sessionJson: r.sessionJson,
        heartbeatJson: r.heartbeatJson,
        lockJson: r.lockJson,
        remoteFile: r.remoteFile,
        recorderProcesses: r.recorderProcesses,
        recorderIdentityVerified: r.recorderIdentityVerified,
      };
    });
  }

  private pull(signal: AbortSignal | undefined) {
    return this.wire.client(EvidenceService).pullEvidence({ evidenceId: this.recordingId }, this.wire.options(this.scope, { timeoutMs: TRANSFER_MS, signal }));
  }
}
