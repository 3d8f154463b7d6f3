import { readFile, rmdir, stat } from "node:fs/promises";
import { dirname, isAbsolute, join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { errorSpecOf, exitCodeFor } from "@farm/shared/error-codes";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { validateContext, validateLabel, validateOutputDir } from "@farm/shared/evidence-options";
import { FARM_VERSION } from "@farm/shared/version";
import { parseVideoSize, validateDurationSeconds, validateSessionId, videoFields } from "@farm/shared/video-options";
import { DeviceTargetSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { VideoService, type InspectVideoResponse, type VideoSession } from "@farm/shared/gen/farm/v1/video_service_pb";
import { allPages } from "@farm/client/all-pages";
import { serviceClient } from "@farm/client/transport";
import { table } from "../output.js";
import { clientSession, type ClientSession } from "../session.js";
import { claimBundleDir, publishBundleFile, writePulledBundle } from "@farm/client/bundle-writer";
import { startProgress } from "../progress/progress.js";
import type { videoInspectOptions, videoListOptions, videoReleaseOptions, videoSessionOptions, videoStartOptions } from "../tree/evidence-commands.js";
import type { Action, CommandContext } from "../tree/spec.js";
import { outputDirOf } from "./evidence.js";

// Video has fixed budgets (start 5 s, stop 15 s); --timeout is only the RPC deadline.
const START_RPC_MS = 30_000;
const STOP_RPC_MS = 80_000;
const TRANSFER_MS = 60_000;
const LIVE = new Set(["starting", "recording", "finalizing"]);

/** `--recording` (or its old spelling `--session`, given once): an id, or the manifest path (or directory) of a bundle started with DIR. */
function recordingArg(opts: { recording?: string | undefined; session?: string | undefined }): string | undefined {
  if (opts.recording !== undefined && opts.session !== undefined) {
    throw invalidArgument(videoFields.session, "give the recording once: --recording (--session is its old spelling)");
  }
  return opts.recording ?? opts.session;
}

async function resolveSession(text: string | undefined): Promise<{ sessionId: string; dir: string | null; local: EvidenceManifest | null }> {
  if (text === undefined || text === "") throw invalidArgument(videoFields.session, "--recording is required (a recording id or a bundle's manifest path)");
  if (!isAbsolute(text) && !text.includes("/")) return { sessionId: validateSessionId(text), dir: null, local: null };
  const path = (await stat(text).then((s) => s.isDirectory(), () => false)) ? join(text, "manifest.json") : text;
  let manifest: EvidenceManifest;
  try {
    manifest = JSON.parse(await readFile(path, "utf8")) as EvidenceManifest;
  } catch (err) {
    throw farmError(Errors.EVIDENCE_SESSION_NOT_FOUND, `${path} is not a readable bundle manifest: ${(err as Error).message}`, videoFields.session);
  }
  if (manifest.kind !== "video" || typeof manifest.evidenceId !== "string") {
    throw farmError(Errors.EVIDENCE_SESSION_NOT_FOUND, `${path} is not a video bundle's manifest`, videoFields.session);
  }
  return { sessionId: validateSessionId(manifest.evidenceId), dir: dirname(path), local: manifest };
}

/** Status and stop use the recording's saved target; a different --device is a mistake, not a redirect. */
function checkTarget(device: string | undefined, sessionId: string, serial: string): void {
  if (device !== undefined && device !== serial) {
    throw invalidArgument("device", `recording ${sessionId} is of ${serial}; --device ${device} conflicts with it`);
  }
}

/**
 * Brings a local bundle directory up to date: the active manifest while
 * recording, then the verified bundle from the store once terminal. A
 * terminal local bundle is never modified again.
 */
async function refreshLocal(session: ClientSession, dir: string, s: VideoSession): Promise<void> {
  const path = join(dir, "manifest.json");
  const current = await readFile(path, "utf8").then((t) => JSON.parse(t) as EvidenceManifest, () => null);
  if (current?.finishedAt) return;
  if (s.stored) {
    const client = serviceClient(EvidenceService, session.config);
    await writePulledBundle({ dir, evidenceId: s.sessionId, claim: false }, client.pullEvidence({ evidenceId: s.sessionId }, { timeoutMs: TRANSFER_MS }));
  } else if (s.manifestJson) {
    const m = JSON.parse(s.manifestJson) as EvidenceManifest;
    // Files come only with the terminal bundle; until then just the manifest.
    if (!m.finishedAt) {
      const text = s.manifestJson;
      await publishBundleFile(dir, "manifest.json", text).catch((err: unknown) => {
        throw farmError(Errors.EVIDENCE_CAPTURE_FAILED, `recording ${s.sessionId}: writing the active manifest into ${dir} failed: ${(err as Error).message}`);
      });
    }
  }
}

function view(s: VideoSession, manifestPath: string | null, okWhen: (status: string) => boolean): Record<string, unknown> {
  const manifest = s.manifestJson ? (JSON.parse(s.manifestJson) as EvidenceManifest) : null;
  const ok = okWhen(s.status) && s.code === "";
  return {
    ok,
    ...(ok ? {} : { code: s.code || Errors.EVIDENCE_CAPTURE_FAILED.code, message: s.message || `recording is ${s.status}` }),
    recordingId: s.sessionId,
    /** Deprecated: the old name of recordingId (a recording is not a test session), kept for scripts. */
    sessionId: s.sessionId,
    status: s.status,
    manifestPath,
    serial: s.serial,
    agent: s.agentName || s.agentId,
    workerAvailable: s.workerAvailable,
    stored: s.stored,
    recoveryState: s.recoveryState,
    deadline: s.deadline ? new Date(timestampMs(s.deadline)).toISOString() : null,
    video: manifest?.video ?? null,
    errors: manifest?.errors ?? [],
  };
}

/**
 * A recording that failed is farm's failure, not a failing test's 1: its
 * code's exit when the code is in the error table, else (a manifest's own
 * code, VIDEO_STARTUP_FAILED say) EVIDENCE_CAPTURE_FAILED's 69.
 */
function exitOf(data: Record<string, unknown>): number {
  if (data["ok"]) return 0;
  const code = String(data["code"]);
  return exitCodeFor(errorSpecOf(code) ? code : Errors.EVIDENCE_CAPTURE_FAILED.code);
}

function pretty(d: Record<string, unknown>): string {
  const v = d["video"] as EvidenceManifest["video"] | null;
  return [
    `recording ${String(d["recordingId"])}: ${String(d["status"])}${d["code"] ? ` (${String(d["code"])})` : ""}`,
    d["message"] ? `  ${String(d["message"])}` : null,
    d["manifestPath"] ? `  manifest: ${String(d["manifestPath"])}` : null,
    v
      ? `  requested ${v.requestedSize.width}x${v.requestedSize.height} for ${v.requestedDurationSeconds} s; actual ${v.actualSize ? `${v.actualSize.width}x${v.actualSize.height}` : "-"}, media ${v.mediaDurationMs ?? "-"} ms, host ${
        v.hostDurationMs ?? "-"
      } ms, stop: ${v.stopReason ?? "-"}`
      : null,
    ...((d["errors"] as EvidenceManifest["errors"]) ?? []).map((e) => `  ${e.stage}: ${e.code}: ${e.message}`),
  ]
    .filter((l) => l !== null)
    .join("\n");
}

/** `farm evidence video start [DIR]` (or the old `--output-dir DIR`). */
export const startVideo: Action<typeof videoStartOptions> = async (input) => {
  const { opts, ctx } = input;
  // Every rule is checked before any device, coordinator or file is touched.
  const serial = opts.device;
  const durationSeconds = validateDurationSeconds(opts.durationSeconds);
  const size = opts.size;
  parseVideoSize(size);
  const label = validateLabel(opts.label);
  const context = validateContext(opts.contextJson);
  const outputFlag = outputDirOf(input.args[0], opts.outputDir);
  const outputDir = outputFlag === undefined ? undefined : validateOutputDir(outputFlag);
  const session = clientSession(input);
  const client = serviceClient(VideoService, session.config, { lease: opts.lease || undefined });
  if (outputDir) await claimBundleDir(outputDir);
  let res;
  try {
    res = await client.startVideo(
      {
        target: create(DeviceTargetSchema, { serial, agent: opts.agent ?? "" }),
        durationSeconds,
        size: size ?? "",
        ...(label === null ? {} : { label }),
        contextJson: JSON.stringify(context),
        cliVersion: FARM_VERSION,
      },
      { timeoutMs: Math.max(session.timeoutMs, START_RPC_MS) },
    );
  } catch (err) {
    // Refused before anything was recorded: the claimed directory is still empty.
    if (outputDir) await rmdir(outputDir).catch(() => undefined);
    throw err;
  }
  const s = res.session as VideoSession;
  let manifestPath: string | null = null;
  if (outputDir) {
    await refreshLocal(session, outputDir, s);
    manifestPath = join(outputDir, "manifest.json");
  }
  const data = view(s, manifestPath, (status) => status === "recording");
  ctx.printer.emit(data, () => pretty(data));
  return exitOf(data);
};

/** A live view of a stop: the session's stages as they change, polled while the stop call waits. */
async function stopWithStages(ctx: CommandContext, client: ReturnType<typeof serviceClient<typeof VideoService>>, session: ClientSession, sessionId: string): Promise<VideoSession> {
  const progress = await startProgress(ctx, `stopping ${sessionId}`);
  let polling = true;
  const poll = (async () => {
    let last = "";
    while (polling) {
      await new Promise((r) => setTimeout(r, 500));
      if (!polling) break;
      const s = await client.getVideoStatus({ sessionId }, { timeoutMs: 5_000 }).then((r) => r.session, () => undefined);
      const stage = s ? `${s.status}${s.recoveryState ? ` (${s.recoveryState})` : ""}` : "";
      if (stage && stage !== last) {
        last = stage;
        progress.update(`stopping ${sessionId}: ${stage}`);
      }
    }
  })();
  try {
    return (await client.stopVideo({ sessionId }, { timeoutMs: Math.max(session.timeoutMs, STOP_RPC_MS) })).session as VideoSession;
  } finally {
    polling = false;
    await poll;
    progress.stop();
  }
}

function sessionCommand(name: "status" | "stop"): Action<typeof videoSessionOptions> {
  return async (input) => {
    const { opts, ctx } = input;
    const target = await resolveSession(recordingArg(opts));
    const session = clientSession(input);
    const client = serviceClient(VideoService, session.config);
    // A conflicting --device is refused before anything changes: from the
    // local bundle when there is one, else from the session's saved target,
    // read (status changes nothing) before a stop is ever sent.
    let s: VideoSession | undefined;
    if (target.local) checkTarget(opts.device, target.sessionId, target.local.device.serial);
    else if (opts.device !== undefined) {
      const saved = (await client.getVideoStatus({ sessionId: target.sessionId }, { timeoutMs: session.timeoutMs })).session as VideoSession;
      checkTarget(opts.device, saved.sessionId, saved.serial);
      if (name === "status") s = saved;
    }
    s ??= name === "stop" ? await stopWithStages(ctx, client, session, target.sessionId) : ((await client.getVideoStatus({ sessionId: target.sessionId }, { timeoutMs: session.timeoutMs })).session as VideoSession);
    // The coordinator's record is the saved target; a local bundle that disagrees is not trusted.
    checkTarget(opts.device, s.sessionId, s.serial);
    if (target.dir) await refreshLocal(session, target.dir, s);
    const manifestPath = target.dir ? join(target.dir, "manifest.json") : null;
    const data = view(s, manifestPath, name === "stop" ? (st) => st === "complete" : (st) => st === "complete" || LIVE.has(st));
    ctx.printer.emit(data, () => pretty(data));
    return exitOf(data);
  };
}

export const videoStatus = sessionCommand("status");
export const stopVideo = sessionCommand("stop");

export const inspectVideo: Action<typeof videoInspectOptions> = async (input) => {
  const { opts, ctx } = input;
  const target = await resolveSession(recordingArg(opts));
  const session = clientSession(input);
  const r: InspectVideoResponse = await serviceClient(VideoService, session.config).inspectVideo({ sessionId: target.sessionId }, { timeoutMs: session.timeoutMs });
  const parse = (t: string) => {
    try {
      return JSON.parse(t) as unknown;
    } catch {
      return t;
    }
  };
  const data = {
    recording: r.session ? view(r.session, null, () => true) : null,
    // The recording worker's own state file (session.json in the recording's directory).
    sessionFile: parse(r.sessionJson),
    heartbeat: parse(r.heartbeatJson),
    lock: parse(r.lockJson),
    remoteFile: r.remoteFile,
    recorderProcesses: r.recorderProcesses,
    recorderIdentityVerified: r.recorderIdentityVerified,
  };
  ctx.printer.result(data, () =>
    [
      r.session ? pretty(view(r.session, null, () => true)) : "",
      `worker heartbeat: ${r.heartbeatJson}`,
      `lock: ${r.lockJson}`,
      `remote file: ${r.remoteFile || "(none)"}`,
      `recorder processes: ${r.recorderProcesses || "(none)"}`,
      `recorder identity verified: ${r.recorderIdentityVerified}`,
      "session.json:",
      r.sessionJson,
    ].join("\n"));
  return 0;
};

export const releaseVideo: Action<typeof videoReleaseOptions> = async (input) => {
  const { opts, ctx } = input;
  const target = await resolveSession(recordingArg(opts));
  const reason = opts.reason;
  const session = clientSession(input);
  const res = await serviceClient(VideoService, session.config).releaseVideo({ sessionId: target.sessionId, reason }, { timeoutMs: session.timeoutMs });
  // ok is the release's outcome (a finished recording is a no-op, not a failure); the recording's own state is in status and errors.
  const { ok: _ok, code: _code, message: _message, ...data } = view(res.session as VideoSession, null, () => true);
  const result = { ...data, released: res.released, message: res.note };
  ctx.printer.result(result, () => `${pretty(result)}\n${res.released ? "released" : "nothing released"}`);
  return 0;
};

export const listVideo: Action<typeof videoListOptions> = async (input) => {
  const { opts, ctx } = input;
  const session = clientSession(input);
  const client = serviceClient(VideoService, session.config);
  const filter = { serial: opts.device ?? "", status: opts.status ?? "" };
  const rows = await allPages(async (page) => {
    const res = await client.listVideoSessions({ ...filter, ...page }, { timeoutMs: session.timeoutMs });
    return { items: res.sessions, nextPageToken: res.nextPageToken };
  });
  const recordings = rows.map((s): Record<string, unknown> => ({ ...view(s, null, () => true), createdAt: s.createTime ? new Date(timestampMs(s.createTime)).toISOString() : null }));
  ctx.printer.result({ recordings }, () =>
    table(
      ["RECORDING", "STATUS", "DEVICE", "AGENT", "CREATED", "STOP"],
      recordings.map((s) => [String(s.recordingId), String(s.status), String(s.serial), String(s.agent), String(s.createdAt ?? ""), String((s.video as { stopReason?: string } | null)?.stopReason ?? "")]),
    ));
  return 0;
};
