import { readFile, stat } from "node:fs/promises";
import { dirname, isAbsolute, join } from "node:path";
import { errorSpecOf, exitCodeFor } from "@farm/shared/error-codes";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { validateContext, validateLabel, validateOutputDir } from "@farm/shared/evidence-options";
import { parseVideoSize, validateDurationSeconds, validateSessionId, videoFields } from "@farm/shared/video-options";
import type { Recording, RecordingState } from "@farm/client/recording";
import { table } from "../output.js";
import { clientSession } from "../session.js";
import { startProgress } from "../progress/progress.js";
import type { videoInspectOptions, videoListOptions, videoReleaseOptions, videoSessionOptions, videoStartOptions } from "../tree/evidence-commands.js";
import type { Action, CommandContext } from "../tree/spec.js";
import { asCli } from "./device-target.js";
import { outputDirOf } from "./evidence.js";
import { libraryClient } from "./library-client.js";

// Video has fixed budgets (start 5 s, stop 15 s; @farm/client's Recording): --timeout is only the RPC deadline.
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

function view(s: RecordingState, manifestPath: string | null, okWhen: (status: string) => boolean): Record<string, unknown> {
  const ok = okWhen(s.status) && s.code === "";
  return {
    ok,
    ...(ok ? {} : { code: s.code || Errors.EVIDENCE_CAPTURE_FAILED.code, message: s.message || `recording is ${s.status}` }),
    recordingId: s.recordingId,
    /** Deprecated: the old name of recordingId (a recording is not a test session), kept for scripts. */
    sessionId: s.recordingId,
    status: s.status,
    manifestPath,
    serial: s.serial,
    agent: s.agent,
    workerAvailable: s.workerAvailable,
    stored: s.stored,
    recoveryState: s.recoveryState,
    deadline: s.deadline ? s.deadline.toISOString() : null,
    video: s.manifest?.video ?? null,
    errors: s.manifest?.errors ?? [],
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

/** `farm evidence video start [DIR]` (or the old `--output-dir DIR`): @farm/client's Device.recordVideo. */
export const startVideo: Action<typeof videoStartOptions> = async (input) => {
  const { opts, ctx } = input;
  // Every rule is checked before any device, coordinator or file is touched.
  const durationSeconds = validateDurationSeconds(opts.durationSeconds);
  parseVideoSize(opts.size);
  validateLabel(opts.label);
  const context = validateContext(opts.contextJson);
  const outputFlag = outputDirOf(input.args[0], opts.outputDir);
  const outputDir = outputFlag === undefined ? undefined : validateOutputDir(outputFlag);
  const farm = libraryClient(clientSession(input));
  // Only the lease: a recording is not a step of a session.
  const device = farm.device(opts.device, { lease: opts.lease || undefined, agent: opts.agent ?? "" });
  const rec = await asCli(device.recordVideo({ durationSeconds, size: opts.size, label: opts.label, context, outputDir }));
  const s = rec.started as RecordingState;
  const data = view(s, outputDir ? join(outputDir, "manifest.json") : null, (status) => status === "recording");
  ctx.printer.emit(data, () => pretty(data));
  return exitOf(data);
};

/** A live view of a stop: the recording's stages as they change, polled while the stop call waits. */
async function stopWithStages(ctx: CommandContext, rec: Recording): Promise<RecordingState> {
  const progress = await startProgress(ctx, `stopping ${rec.recordingId}`);
  let polling = true;
  const poll = (async () => {
    let last = "";
    while (polling) {
      await new Promise((r) => setTimeout(r, 500));
      if (!polling) break;
      const s = await rec.status({ timeoutMs: 5_000 }).then((r) => r, () => undefined);
      const stage = s ? `${s.status}${s.recoveryState ? ` (${s.recoveryState})` : ""}` : "";
      if (stage && stage !== last) {
        last = stage;
        progress.update(`stopping ${rec.recordingId}: ${stage}`);
      }
    }
  })();
  try {
    return await asCli(rec.stop());
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
    const rec = libraryClient(clientSession(input)).recording(target.sessionId);
    // A conflicting --device is refused before anything changes: from the
    // local bundle when there is one, else from the recording's saved target,
    // read (status changes nothing) before a stop is ever sent.
    let s: RecordingState | undefined;
    if (target.local) checkTarget(opts.device, target.sessionId, target.local.device.serial);
    else if (opts.device !== undefined) {
      const saved = await asCli(rec.status());
      checkTarget(opts.device, saved.recordingId, saved.serial);
      if (name === "status") s = saved;
    }
    s ??= name === "stop" ? await stopWithStages(ctx, rec) : await asCli(rec.status());
    // The coordinator's record is the saved target; a local bundle that disagrees is not trusted.
    checkTarget(opts.device, s.recordingId, s.serial);
    if (target.dir) await asCli(rec.updateBundle(target.dir, s));
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
  const r = await asCli(libraryClient(clientSession(input)).recording(target.sessionId).inspect());
  const parse = (t: string) => {
    try {
      return JSON.parse(t) as unknown;
    } catch {
      return t;
    }
  };
  const data = {
    recording: r.state ? view(r.state, null, () => true) : null,
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
      r.state ? pretty(view(r.state, null, () => true)) : "",
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
  const res = await asCli(libraryClient(clientSession(input)).recording(target.sessionId).release(opts.reason));
  // ok is the release's outcome (a finished recording is a no-op, not a failure); the recording's own state is in status and errors.
  const { ok: _ok, code: _code, message: _message, ...data } = view(res.state, null, () => true);
  const result = { ...data, released: res.released, message: res.note };
  ctx.printer.result(result, () => `${pretty(result)}\n${res.released ? "released" : "nothing released"}`);
  return 0;
};

export const listVideo: Action<typeof videoListOptions> = async (input) => {
  const { opts, ctx } = input;
  const rows = await asCli(libraryClient(clientSession(input)).recordings({ serial: opts.device, status: opts.status }));
  const recordings = rows.map((s): Record<string, unknown> => ({ ...view(s, null, () => true), createdAt: s.createdAt ? s.createdAt.toISOString() : null }));
  ctx.printer.result({ recordings }, () =>
    table(
      ["RECORDING", "STATUS", "DEVICE", "AGENT", "CREATED", "STOP"],
      recordings.map((s) => [String(s.recordingId), String(s.status), String(s.serial), String(s.agent), String(s.createdAt ?? ""), String((s.video as { stopReason?: string } | null)?.stopReason ?? "")]),
    ));
  return 0;
};
