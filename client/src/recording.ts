import { Errors } from "@farm/shared/error-codes";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { VideoService, type VideoSession } from "@farm/shared/gen/farm/v1/video_service_pb";
import { join } from "node:path";
import { writePulledBundle } from "./bundle-writer.js";
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
  /** "starting", "recording", "finalizing", "complete", or a failed state. */
  status: string;
  /** The failure's code and message ("" while fine). */
  code: string;
  message: string;
  /** The bundle is in the coordinator's evidence store. */
  stored: boolean;
  /** The bundle's manifest as it stands (null before the agent wrote one). */
  manifest: EvidenceManifest | null;
}

function stateOf(s: VideoSession | undefined): RecordingState {
  if (!s) throw new FarmError(Errors.INTERNAL, "the coordinator answered without the recording", undefined, null);
  return { recordingId: s.sessionId, status: s.status, code: s.code, message: s.message, stored: s.stored, manifest: s.manifestJson ? (JSON.parse(s.manifestJson) as EvidenceManifest) : null };
}

/**
 * A screen recording started by Device.recordVideo: its evidence id is
 * recordingId. stop() ends it and, once the bundle is stored, can pull it
 * into a new directory (as `farm evidence video stop` with DIR).
 */
export class Recording {
  constructor(
    private readonly wire: Wire,
    private readonly scope: CallScope,
    readonly recordingId: string,
  ) {}

  status(opts: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {}): Promise<RecordingState> {
    return farmCall(async () => stateOf((await this.wire.client(VideoService).getVideoStatus({ sessionId: this.recordingId }, this.wire.options(this.scope, opts))).session));
  }

  /**
   * Stops the recording and waits for its bundle. A recording that ended
   * badly is a state with its code (a failed capture is data, as
   * captureEvidence's), not a throw. With outputDir (a new absolute
   * directory), the stored bundle is written there.
   */
  stop(opts: { outputDir?: string | undefined; timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {}): Promise<RecordingState & { manifestPath: string | null }> {
    return farmCall(async () => {
      const s = stateOf((await this.wire.client(VideoService).stopVideo({ sessionId: this.recordingId }, this.wire.options(this.scope, { ...opts, timeoutMs: opts.timeoutMs ?? STOP_RPC_MS }))).session);
      if (opts.outputDir === undefined) return { ...s, manifestPath: null };
      if (!s.stored) throw new FarmError(Errors.EVIDENCE_CAPTURE_FAILED, `recording ${s.recordingId} is ${s.status} and its bundle is not stored: nothing to write to ${opts.outputDir}`, "outputDir", null);
      const client = this.wire.client(EvidenceService);
      const manifest = await writePulledBundle(
        { dir: opts.outputDir, evidenceId: s.recordingId, claim: true },
        client.pullEvidence({ evidenceId: s.recordingId }, this.wire.options(this.scope, { timeoutMs: TRANSFER_MS, signal: opts.signal })),
      );
      return { ...s, manifest, manifestPath: join(opts.outputDir, "manifest.json") };
    });
  }
}
