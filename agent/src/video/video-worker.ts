import { createHash } from "node:crypto";
import { rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { renameDurably, writeFileDurably } from "@farm/shared/durable-file";
import type { EvidenceArtifact, EvidenceError, EvidenceManifest, EvidenceStatus, EvidenceVideo, ManifestErrorCode } from "@farm/shared/evidence-manifest";
import { sha256File } from "@farm/shared/verified-file";
import { shellV2, type ShellResult } from "../adb/adb-shell.js";
import { metadataComplete } from "../evidence/device-metadata.js";
import { hostProcessStartIdentity } from "./host-process.js";
import { mediaTools, verifyVideo, type MediaVerification } from "./media-verify.js";
import { checkRecorder, listRecorders } from "./recorder-identity.js";
import { initialVideo, videoManifest } from "./video-manifest.js";
import { waitForChange } from "./wait-for-change.js";
import { PullError, pullRemoteFile } from "./remote-pull.js";
import { HEARTBEAT_INTERVAL_MS, releaseVideoLock, VideoSessionFiles, type VideoSessionRecord } from "./video-session-files.js";

/** How long the worker looks for its live recorder before giving up on startup. */
const STARTUP_WINDOW_MS = 4_500;
const PULL_DEADLINE_MS = 10_000;
const STDERR_CAP = 1024 * 1024;
/** Past the device's time limit, how long a recorder may take to finish its file. */
const FINISH_GRACE_MS = 15_000;
const SHELL_STEP_MS = 5_000;
/** How long a recorder whose stream was hung up may take to leave the process list. */
const RECORDER_EXIT_WAIT_MS = 10_000;

/** Messages to the agent that started the worker (over IPC, while it listens). */
export type WorkerMessage = { type: "recording" } | { type: "failed"; code: ManifestErrorCode; message: string };

type RecorderEnd = { kind: "exit"; result: ShellResult; atMs: number } | { kind: "lost"; error: Error; atMs: number };

const iso = (ms = Date.now()) => new Date(ms).toISOString();
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const round = (ms: number) => Math.round(ms * 1000) / 1000;
const step = () => AbortSignal.timeout(SHELL_STEP_MS);

/**
 * One recording, start to published bundle, in a process of its own that
 * outlives the agent and the CLI: it starts screenrecord on the phone, finds
 * and identifies the remote recorder, heartbeats with its nonce, waits for a
 * nonce-bound stop request or the device's time limit, stops the recorder
 * only after checking its identity, then pulls, probes and fully decodes the
 * media. Only this worker writes the session's manifest.
 */
export async function runVideoWorker(sessionDir: string, send: (m: WorkerMessage) => void): Promise<void> {
  const files = new VideoSessionFiles(sessionDir);
  let rec = await files.readSession();
  const save = async (patch: Partial<VideoSessionRecord>) => {
    rec = { ...rec, ...patch };
    await files.writeSession(rec);
  };
  let seq = 0;
  const beat = () => files.writeHeartbeat({ nonce: rec.nonce, pid: process.pid, seq: seq++, atMs: Date.now() }).catch(() => undefined);
  await beat();
  const heartbeat = setInterval(() => void beat(), HEARTBEAT_INTERVAL_MS);
  const adb = rec.adb;
  const tools = mediaTools();
  const errors: EvidenceError[] = [...(rec.metadataErrors ?? [])];
  const fail = (code: ManifestErrorCode, stage: string, message: string, component: string | null) => {
    const e = { code, stage, message, component };
    errors.push(e);
    return e;
  };
  const startedAt = iso();
  await save({ worker: { pid: process.pid, startIdentity: hostProcessStartIdentity(process.pid) }, state: "starting" });

  const video: EvidenceVideo = initialVideo(rec);
  const manifest = (status: EvidenceStatus, artifacts: EvidenceArtifact[], finishedAt: string | null): EvidenceManifest => videoManifest(rec, { startedAt, finishedAt, status, artifacts, errors, video });

  // 1. The recorder: a foreground screenrecord on a stream this worker owns.
  const command = `screenrecord --verbose --time-limit ${rec.durationSeconds} --size ${rec.requestedSize.width}x${rec.requestedSize.height} ${rec.remotePath}`;
  const hangUp = new AbortController();
  const t0 = performance.now();
  const recorderStartedAt = Date.now();
  const ended: Promise<RecorderEnd> = shellV2(adb, rec.serial, command, hangUp.signal).then(
    (result) => ({ kind: "exit", result, atMs: performance.now() }),
    (error: Error) => ({ kind: "lost", error, atMs: performance.now() }),
  );
  let end: RecorderEnd | undefined;
  void ended.then((e) => (end = e));

  // 2. Find the live recorder by its unique path; that is the startup proof.
  const startupDeadline = performance.now() + STARTUP_WINDOW_MS;
  while (!end && !rec.recorder && performance.now() < startupDeadline) {
    try {
      const found = await listRecorders(adb, rec.serial, rec.remotePath, step());
      if (found.length === 1 && !end) await save({ recorder: found[0]!, state: "recording" });
    } catch {
      // The device may be slow to answer; keep trying within the window.
    }
    if (!rec.recorder && !end) await Promise.race([ended, new Promise((r) => setTimeout(r, 100))]);
  }

  const stderrOf = (e: RecorderEnd | undefined) => (e?.kind === "exit" ? e.result.stderr : Buffer.alloc(0));
  if (!rec.recorder) {
    // Startup failed: the recorder exited, the stream broke, or it never showed up.
    let message: string;
    if (end?.kind === "exit") message = `screenrecord exited with ${end.result.exitCode} at startup: ${end.result.stderr.toString("utf8").trim().slice(0, 500)}`;
    else if (end?.kind === "lost") message = `the adb stream to the recorder broke at startup: ${end.error.message}`;
    else {
      message = `no live screenrecord writing ${rec.remotePath} was found within ${STARTUP_WINDOW_MS} ms`;
      // Our own stream: hanging up ends a recorder we could not identify.
      hangUp.abort();
      end = await ended;
    }
    fail("VIDEO_STARTUP_FAILED", "startup", message, "screenrecord");
    video.stopReason = "startup_failure";
    video.hostDurationMs = round(end.atMs - t0);
    send({ type: "failed", code: "VIDEO_STARTUP_FAILED", message });
    await finish(end, false);
    return;
  }
  // The active manifest exists before anyone is told the recording started.
  await files.writeManifest(manifest("partial", [], null));
  send({ type: "recording" });

  // 3. Wait for the device's time limit, a stop request, or the stream to break.
  const stop = await waitForStop(files, rec.nonce, ended, rec.durationSeconds * 1000 + FINISH_GRACE_MS - (Date.now() - recorderStartedAt));
  let signalSent = false;
  // Past the time limit and its grace with no stop asked for: the worker ends it, and says so.
  const overdue = stop.reason === "overdue" && !end;
  const stopRecord: Record<string, unknown> = { requested: stop.reason === "requested", reason: stop.reason };
  if (overdue) {
    fail(
      "VIDEO_RECORDER_OVERDUE",
      "stop",
      `the recorder was still running ${FINISH_GRACE_MS / 1000} s past its ${rec.durationSeconds} s time limit and nobody had asked it to stop; the worker stopped it`,
      "screenrecord",
    );
  }
  if (!end && (stop.reason === "requested" || stop.reason === "overdue")) {
    // 4. Identify before signalling; after an uncertain failure, never signal again.
    try {
      const check = await checkRecorder(adb, rec.serial, rec.recorder, rec.remotePath, step());
      stopRecord["identity"] = check.verdict;
      if (check.verdict === "match" && !end) {
        const kill = await shellV2(adb, rec.serial, `kill -INT ${rec.recorder.pid}`, step());
        signalSent = kill.exitCode === 0;
        stopRecord["signal"] = { sent: signalSent, exitCode: kill.exitCode, atMs: Date.now(), output: kill.stderr.toString("utf8").trim().slice(0, 500) };
      } else if (check.verdict === "mismatch") {
        fail("VIDEO_RECORDER_IDENTITY_MISMATCH", "stop", `pid ${rec.recorder.pid} is no longer the recorder started for ${rec.remotePath}; it was not signalled`, "screenrecord");
      }
    } catch (err) {
      stopRecord["signal"] = { sent: null, uncertain: true, error: (err as Error).message };
      fail("VIDEO_STOP_UNCERTAIN", "stop", `stopping the recorder had an uncertain outcome and is not retried: ${(err as Error).message}`, "adb");
    }
    // The recorder finishes its file and exits; bounded by the time limit.
    const bound = Math.max(FINISH_GRACE_MS, rec.durationSeconds * 1000 + FINISH_GRACE_MS - (Date.now() - recorderStartedAt));
    await Promise.race([ended, new Promise((r) => setTimeout(r, bound))]);
    if (!end) {
      hangUp.abort();
      fail("VIDEO_RECORDER_UNRESPONSIVE", "stop", `the recorder did not finish within ${bound} ms; the stream was closed`, "screenrecord");
    }
  }
  end = await ended;
  video.hostDurationMs = round(end.atMs - t0);
  // "requested" only when a stop was asked for and the signal went out; an overdue recorder the worker had to end is a failure of the recorder.
  if (end.kind === "exit" && end.result.exitCode === 0) video.stopReason = overdue ? "failure" : signalSent && stop.reason === "requested" ? "requested" : "duration_cap";
  else {
    video.stopReason = "failure";
    fail(
      "VIDEO_RECORDER_FAILED",
      "record",
      end.kind === "exit" ? `screenrecord exited with ${end.result.exitCode}: ${end.result.stderr.toString("utf8").trim().slice(0, 500)}` : `the adb stream to the recorder broke: ${end.error.message}`,
      end.kind === "exit" ? "screenrecord" : "adb",
    );
  }
  await finish(end, true, stopRecord, !overdue);

  async function finish(recEnd: RecorderEnd, recorded: boolean, stopRecord: Record<string, unknown> = {}, stoppedAsAsked = true): Promise<void> {
    await save({ state: "finalizing" });
    const artifacts: EvidenceArtifact[] = [];
    const captures: Record<string, unknown> = {
      source: "adb_screenrecord",
      command,
      remotePath: rec.remotePath,
      recorder: rec.recorder,
      startedAt: iso(recorderStartedAt),
      end: recEnd.kind === "exit" ? { exitCode: recEnd.result.exitCode, stdout: recEnd.result.stdout.toString("utf8").slice(0, 4096), stderrTruncated: recEnd.result.truncated } : { lost: recEnd.error.message },
      stop: stopRecord,
    };

    // encoder.stderr.txt: kept as written, capped at 1 MiB.
    const stderr = stderrOf(recEnd);
    const truncated = recEnd.kind === "exit" && recEnd.result.truncated;
    const errT0 = performance.now();
    const errStart = iso();
    const errBytes = stderr.subarray(0, STDERR_CAP);
    let stderrOk = false;
    let stderrStored = false;
    let stderrError: EvidenceError | undefined;
    try {
      await writeFileDurably(files.path("encoder.stderr.txt"), errBytes);
      stderrStored = true;
      stderrOk = !truncated;
    } catch (err) {
      stderrError = fail("RECEIPT_WRITE_FAILED", "persist", `encoder.stderr.txt could not be written: ${(err as Error).message}`, "worker");
    }
    if (truncated) stderrError = fail("ENCODER_STDERR_TRUNCATED", "persist", `encoder stderr passed ${STDERR_CAP} bytes and was truncated`, "screenrecord");
    artifacts.push({
      kind: "encoder_stderr",
      // Listed only if it is on disk: a manifest never names a file that is not there.
      path: stderrStored ? "encoder.stderr.txt" : null,
      mimeType: "text/plain",
      status: stderrOk ? "complete" : stderrStored ? "partial" : "failed",
      bytes: stderrStored ? errBytes.length : null,
      sha256: stderrStored ? sha256(errBytes) : null,
      startedAt: errStart,
      finishedAt: iso(),
      durationMs: round(performance.now() - errT0),
      commandId: null,
      taskId: rec.sessionId,
      ...(stderrError ? { error: stderrError } : {}),
    });

    // The media: pull, probe, decode; only verified bytes become video.mp4.
    let verification: MediaVerification | null = null;
    let videoOk = false;
    let onlyEmpty = false;
    const vT0 = performance.now();
    const vStart = iso();
    let videoArtifact: EvidenceArtifact = {
      kind: "video",
      path: null,
      mimeType: "video/mp4",
      status: "failed",
      bytes: null,
      sha256: null,
      startedAt: vStart,
      finishedAt: vStart,
      durationMs: 0,
      commandId: null,
      taskId: rec.sessionId,
    };
    if (recorded) {
      const partial = files.path("video.partial.mp4");
      let pulled = false;
      try {
        const p = await pullRemoteFile(adb, rec.serial, rec.remotePath, partial, PULL_DEADLINE_MS);
        pulled = true;
        captures["pull"] = { ok: true, bytes: p.bytes };
      } catch (err) {
        // The bytes that did arrive stay as video.partial.mp4 and are listed below.
        captures["pull"] = { ok: false, bytes: err instanceof PullError ? err.bytes : null, error: (err as Error).message };
        videoArtifact.error = fail("VIDEO_PULL_FAILED", "pull", `pulling ${rec.remotePath} failed: ${(err as Error).message}`, "adb");
      }
      const size = await stat(partial).then((s) => s.size, () => -1);
      if (pulled && size > 0) {
        verification = await verifyVideo(partial, rec.requestedSize, tools);
        captures["verification"] = verification;
        const p = verification.probe;
        if (p?.codec) video.codec = p.codec;
        if (p?.width && p.height) video.actualSize = { width: p.width, height: p.height };
        if (p?.durationMs !== undefined) video.mediaDurationMs = p.durationMs;
        for (const problem of verification.problems) videoArtifact.error = fail(problem.code, problem.stage, problem.message, "ffmpeg");
        videoOk = verification.ok;
        onlyEmpty = !verification.ok && verification.problems.every((x) => x.code === "VIDEO_EMPTY") && (verification.frames ?? 0) > 0;
      } else if (pulled) {
        videoArtifact.error = fail("VIDEO_EMPTY", "pull", "the recording is empty (0 bytes)", "screenrecord");
      }
      if (size > 0) {
        const path = videoOk ? "video.mp4" : "video.partial.mp4";
        // Only verified media gets the final name, and that name survives a crash.
        if (videoOk) await renameDurably(partial, files.path(path));
        const digest = await sha256File(files.path(path));
        videoArtifact = { ...videoArtifact, path, status: videoOk ? "complete" : "partial", bytes: size, sha256: digest };
      } else if (size === 0) {
        // An empty pull is not evidence; no empty file is left beside the bundle.
        await rm(partial, { force: true });
      }
    }
    videoArtifact.finishedAt = iso();
    videoArtifact.durationMs = round(performance.now() - vT0);
    artifacts.unshift(videoArtifact);

    // The remote temp file goes only after successful verification.
    if (videoOk) {
      try {
        const rm = await shellV2(adb, rec.serial, `rm -f ${rec.remotePath}`, step());
        video.remoteRetained = rm.exitCode !== 0;
      } catch {
        video.remoteRetained = true;
      }
    }

    // captures.json: the host's receipt for the recorder, not an invented result.
    const capBytes = Buffer.from(JSON.stringify({ evidenceId: rec.sessionId, serial: rec.serial, captures: { video: captures } }, null, 2) + "\n");
    const capStart = iso();
    let capOk = true;
    try {
      await writeFileDurably(files.path("captures.json"), capBytes);
    } catch (err) {
      capOk = false;
      fail("RECEIPT_WRITE_FAILED", "persist", (err as Error).message, "worker");
    }
    artifacts.push({
      kind: "capture_envelopes",
      path: capOk ? "captures.json" : null,
      mimeType: "application/json",
      status: capOk ? "complete" : "failed",
      bytes: capOk ? capBytes.length : null,
      sha256: capOk ? sha256(capBytes) : null,
      startedAt: capStart,
      finishedAt: iso(),
      durationMs: 0,
      commandId: null,
      taskId: null,
    });

    const status: EvidenceStatus = videoOk && stderrOk && capOk && stoppedAsAsked && metadataComplete(rec.device) ? "complete" : videoOk || onlyEmpty ? "partial" : "failed";

    // The lock goes once the recorder's end is known; otherwise an operator decides.
    let recorderGone = recEnd.kind === "exit";
    // A hung-up recorder (SIGHUP) finishes its file and exits; give it the time to, then look.
    for (const until = Date.now() + RECORDER_EXIT_WAIT_MS; !recorderGone && Date.now() < until;) {
      try {
        recorderGone = (await listRecorders(adb, rec.serial, rec.remotePath, step())).length === 0;
      } catch {
        // Unreachable or slow now; it may answer within the wait.
      }
      if (!recorderGone) await new Promise((r) => setTimeout(r, 250));
    }
    // The recovery decision is recorded before the manifest says terminal, so nobody sees it change.
    if (!recorderGone) await save({ recoveryState: "recovery_required", recoveryReason: "the recorder's end could not be observed; check the device before releasing the lock" });
    await files.writeManifest(manifest(status, artifacts, iso()));
    if (recorderGone) await releaseVideoLock(rec.lockFile, rec.sessionId, rec.nonce);
    await save({ state: "terminal" });
    clearInterval(heartbeat);
    await files.writeHeartbeat({ nonce: rec.nonce, pid: process.pid, seq: seq++, atMs: Date.now(), final: true });
    // Tells a running agent the bundle is ready to upload.
    await writeFile(files.finishedMarker(), "", { mode: 0o600 }).catch(() => undefined);
  }
}

type StopCause = { reason: "requested" | "ended" | "overdue" };

/** Resolves on a stop request bound to this nonce, the recorder's end, or the overdue bound. */
async function waitForStop(files: VideoSessionFiles, nonce: string, ended: Promise<unknown>, overdueMs: number): Promise<StopCause> {
  const done = new AbortController();
  try {
    const requested = waitForChange(join(files.dir, "stop-requests"), async () => ((await files.stopRequests(nonce)).length > 0 ? true : undefined), {
      timeoutMs: overdueMs,
      signal: done.signal,
    }).then((r): StopCause => ({ reason: r ? "requested" : "overdue" }));
    return await Promise.race([requested, ended.then((): StopCause => ({ reason: "ended" }))]);
  } finally {
    done.abort();
  }
}
