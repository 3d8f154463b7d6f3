import { fork, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { closeSync, openSync, watch, type FSWatcher } from "node:fs";
import { waitForChange } from "./wait-for-change.js";
import { mkdir, readdir, readFile, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { Transport } from "@connectrpc/connect";
import { actionError, Errors, farmError, invalidArgument, toErrorReport } from "@farm/shared/errors";
import type { EvidenceError, EvidenceManifest } from "@farm/shared/evidence-manifest";
import { validateContext, validateLabel } from "@farm/shared/evidence-options";
import type { Logger } from "@farm/shared/log";
import { checkVideoAspect, defaultVideoSize, orientedDisplay, parseVideoSize, validateDurationSeconds, validateSessionId } from "@farm/shared/video-options";
import { InspectVideoResponseSchema, VideoSessionSchema, type InspectVideoResponse, type StartVideoRequest, type VideoSession } from "@farm/shared/gen/farm/v1/video_service_pb";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { shellV2 } from "../adb/adb-shell.js";
import type { DeviceWatcher } from "../devices/device-watcher.js";
import { readDeviceMetadata } from "../evidence/device-metadata.js";
import { uploadBundle } from "../evidence/evidence-upload.js";
import { checkMediaTools, mediaTools } from "./media-verify.js";
import { checkRecorder, listRecorders } from "./recorder-identity.js";
import type { WorkerMessage } from "./video-worker.js";
import { initialVideo, videoManifest } from "./video-manifest.js";
import { videoStatus } from "./video-status.js";
import { acquireVideoLock, ensureVideoDirs, readVideoLock, releaseVideoLock, videoLockFile, VideoSessionFiles, type VideoLockHolder, type VideoSessionRecord } from "./video-session-files.js";

/** Start answers within this long of spawning the worker. */
export const START_ACK_MS = 5_000;
/** Stop waits at most this long for the terminal bundle. */
export const STOP_WAIT_MS = 15_000;
/** Past its own start bound, how long a lock holder's worker may take to show its first heartbeat. */
const HOLDER_START_SLACK_MS = 2_000;
/** How long a lock file may stay empty between its exclusive create and its content. */
const LOCK_WRITE_WAIT_MS = 1_000;

export interface VideoDeps {
  adb: AdbServerAddress;
  dataDir: string;
  lockDir: string;
  transport: Transport;
  watcher: DeviceWatcher;
  agent: { id: string; host: string; version: string };
  log: Logger;
}

const workerScript = fileURLToPath(new URL("./worker-main.js", import.meta.url));

/**
 * The agent's side of managed video: validates and starts sessions (one
 * detached worker each), answers status, stop and inspect from the
 * session's files, and uploads terminal bundles to the coordinator's store.
 * It never writes a manifest for a live worker and never signals a process.
 */
export class VideoSessions {
  private readonly uploads = new Map<string, Promise<boolean>>();
  private finishedWatcher: FSWatcher | undefined;

  constructor(private readonly deps: VideoDeps) {}

  async init(): Promise<void> {
    await ensureVideoDirs(this.deps.dataDir);
    try {
      this.finishedWatcher = watch(VideoSessionFiles.finishedDir(this.deps.dataDir), () => void this.uploadFinished());
    } catch (err) {
      this.deps.log.warn("cannot watch for finished recordings; they upload on the next attach", { error: (err as Error).message });
    }
  }

  close(): void {
    this.finishedWatcher?.close();
  }

  async start(req: StartVideoRequest, deadlineMs: number): Promise<VideoSession> {
    const label = validateLabel(req.label);
    const context = validateContext(req.contextJson);
    const durationSeconds = validateDurationSeconds(req.durationSeconds);
    const explicitSize = parseVideoSize(req.size);
    // The coordinator issues the id (the only one it lets this agent upload the bundle under).
    const sessionId = issuedSessionId(req.sessionId);
    const serial = req.target?.serial ?? "";
    const device = this.deps.watcher.device(serial);
    if (!device || device.state !== "device") {
      throw actionError(Errors.DEVICE_OFFLINE, `device ${serial} is ${device?.state ?? "not connected to this agent's adb server"}`, { dispatched: false, ambiguous: false }, "target.serial");
    }
    const physicalId = device.identity.physicalId;
    if (!physicalId) throw farmError(Errors.DEVICE_OFFLINE, `device ${serial} has no known identity yet`, "target.serial");

    // Tools and the device's recorder are checked before anything is dispatched.
    const tools = await checkMediaTools(mediaTools());
    if (tools) throw farmError(Errors.EVIDENCE_TOOL_MISSING, tools);
    const remaining = () => Math.max(1, deadlineMs - Date.now() - START_ACK_MS - 500);
    const help = await shellV2(this.deps.adb, serial, "screenrecord --help", AbortSignal.timeout(remaining())).catch((err: Error) => err);
    if (help instanceof Error || help.exitCode !== 0 || !/screenrecord/i.test(help.stdout.toString("utf8") + help.stderr.toString("utf8"))) {
      throw farmError(Errors.EVIDENCE_TOOL_MISSING, `device ${serial} has no usable screenrecord: ${help instanceof Error ? help.message : `exit ${help.exitCode}`}`, "target.serial");
    }
    const metadataErrors: EvidenceError[] = [];
    const meta = await readDeviceMetadata(
      { adb: this.deps.adb, serial, physicalId, bootId: device.facts.bootId || null, agent: this.deps.agent, cliVersion: req.cliVersion || null, hierarchySource: null },
      remaining,
      (code, stage, message, component) => {
        const e: EvidenceError = { code, stage, message, component };
        metadataErrors.push(e);
        return e;
      },
    );
    if (!meta.display) throw farmError(Errors.EVIDENCE_CAPTURE_FAILED, `the display size of ${serial} could not be read (wm size); no recording was started`, "target.serial");
    // Rotation is sampled once, here; it is not tracked during the recording.
    const display = orientedDisplay({ width: meta.display.width, height: meta.display.height }, meta.display.rotation);
    if (explicitSize) checkVideoAspect(explicitSize, display);
    const requestedSize = explicitSize ?? defaultVideoSize(display);

    if (await VideoSessionFiles.of(this.deps.dataDir, sessionId).exists()) {
      throw farmError(Errors.ALREADY_EXISTS, `video session ${sessionId} already exists on this agent`, "session_id");
    }
    const nonce = randomUUID();
    const lockFile = videoLockFile(this.deps.lockDir, physicalId);
    const holder = { sessionId, nonce, physicalId, agentId: this.deps.agent.id, dataDir: this.deps.dataDir, createdAt: new Date().toISOString() };
    // A holder that was still starting and then gave the lock back (its start failed) lets this start try once more.
    for (let attempt = 1;; attempt++) {
      const lock = await acquireVideoLock(lockFile, holder);
      if (lock.acquired) break;
      const held = await this.heldError(lock.holder, serial, lockFile);
      if (held) throw held;
      if (attempt === 3) throw farmError(Errors.EVIDENCE_RECORDING_ACTIVE, `the phone behind ${serial} keeps being claimed by other recordings as they start; try again`, "target.serial");
    }

    const files = VideoSessionFiles.of(this.deps.dataDir, sessionId);
    const record: VideoSessionRecord = {
      sessionId,
      nonce,
      serial,
      physicalId,
      agentId: this.deps.agent.id,
      adb: this.deps.adb,
      durationSeconds,
      requestedSize,
      display: { ...display, rotation: meta.display.rotation },
      label,
      context,
      remotePath: `/data/local/tmp/farm-video-${sessionId}.mp4`,
      createdAt: new Date().toISOString(),
      deadlineAt: new Date(Date.now() + durationSeconds * 1000).toISOString(),
      state: "starting",
      worker: null,
      recorder: null,
      recoveryState: "none",
      recoveryReason: null,
      lockFile,
      device: meta,
      metadataErrors,
    };
    try {
      await mkdir(join(files.dir, "stop-requests"), { recursive: true, mode: 0o700 });
      await files.writeSession(record);
    } catch (err) {
      await releaseVideoLock(lockFile, sessionId, nonce);
      throw err;
    }
    this.deps.log.info("video session starting", { sessionId, serial, durationSeconds, size: `${requestedSize.width}x${requestedSize.height}` });
    const ack = await this.spawnWorker(files);
    if (ack.kind === "spawn-failed") {
      // No recorder was started: record the failure and give the lock back.
      await files.writeManifest(startupFailureManifest(record, `the video worker could not be started: ${ack.message}`, metadataErrors));
      await releaseVideoLock(lockFile, sessionId, nonce);
      await files.writeSession({ ...record, state: "terminal" });
      await this.upload(sessionId);
      return this.describe(files, { code: "VIDEO_STARTUP_FAILED", message: ack.message });
    }
    if (ack.kind === "timeout") {
      await files.requestStop(nonce, "start-timeout");
      return this.describe(files, { code: Errors.COMMAND_TIMEOUT.code, message: `the recorder was not confirmed live within ${START_ACK_MS / 1000} s; a stop was requested. Session ${sessionId} stays available to status.` });
    }
    if (ack.kind === "failed") {
      await this.waitTerminal(files, Math.min(5_000, Math.max(0, deadlineMs - Date.now() - 500)));
      await this.upload(sessionId);
      return this.describe(files, { code: ack.code, message: ack.message });
    }
    // "recording", or the worker exited early: its files say which.
    return this.describe(files, {});
  }

  /**
   * Why the lock is held, as an error; undefined when the holder was still
   * starting and gave the lock back meanwhile. A holder whose worker has not
   * beaten yet is starting, not dead: its start is awaited (until its own
   * start bound) before anyone is told that recovery is needed.
   */
  private async heldError(holder: VideoLockHolder | null, serial: string, lockFile: string): Promise<Error | undefined> {
    if (holder) {
      const files = VideoSessionFiles.of(holder.dataDir, holder.sessionId);
      const startBound = Date.parse(holder.createdAt) + START_ACK_MS + HOLDER_START_SLACK_MS;
      let verdict: "alive" | "gone" | "moved" = (await files.workerAlive(holder.nonce)) ? "alive" : "gone";
      if (verdict === "gone" && Date.now() < startBound && (await files.readSession().then((r) => r.state === "starting", () => true))) {
        verdict = (await waitForChange(
          files.dir,
          async () => {
            if (await files.workerAlive(holder.nonce)) return "alive" as const;
            const now = await readVideoLock(lockFile);
            return now?.sessionId !== holder.sessionId || now.nonce !== holder.nonce ? ("moved" as const) : undefined;
          },
          { timeoutMs: startBound - Date.now(), pollMs: 100 },
        )) ?? "gone";
      }
      if (verdict === "moved") return undefined;
      if (verdict === "alive") {
        return farmError(Errors.EVIDENCE_RECORDING_ACTIVE, `the phone behind ${serial} is already being recorded by session ${holder.sessionId}`, "target.serial");
      }
      return farmError(
        Errors.EVIDENCE_RECOVERY_REQUIRED,
        `the phone behind ${serial} is locked by session ${holder.sessionId}, whose worker is gone; inspect it (\`farm evidence video inspect --session ${holder.sessionId}\`) and release it when safe`,
        "target.serial",
      );
    }
    // Gone meanwhile, or created and not yet written (the exclusive create comes before its content).
    const settled = await waitForChange(dirname(lockFile), async () => {
      if (!(await stat(lockFile).then(() => true, () => false))) return "gone" as const;
      return (await readVideoLock(lockFile)) ?? undefined;
    }, { timeoutMs: LOCK_WRITE_WAIT_MS, pollMs: 50 });
    if (settled === "gone") return undefined;
    if (settled) return this.heldError(settled, serial, lockFile);
    return farmError(Errors.EVIDENCE_RECOVERY_REQUIRED, `the recording lock of the phone behind ${serial} is held but unreadable; see the operator guide`, "target.serial");
  }

  private spawnWorker(files: VideoSessionFiles): Promise<
    { kind: "recording" } | { kind: "failed"; code: string; message: string } | { kind: "timeout" } | { kind: "exited" } | { kind: "spawn-failed"; message: string }
  > {
    return new Promise((resolve) => {
      let child: ChildProcess;
      let settled = false;
      const done = (r: Parameters<typeof resolve>[0]) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        // From here on the worker is on its own: no channel, no ref, its own process group.
        if (child.connected) child.disconnect();
        child.unref();
        resolve(r);
      };
      const timer = setTimeout(() => done({ kind: "timeout" }), START_ACK_MS);
      // The worker's own stdout/stderr go to worker.log in its session dir.
      const log = openSync(files.path("worker.log"), "a", 0o600);
      try {
        child = fork(workerScript, [files.dir], { detached: true, stdio: ["ignore", log, log, "ipc"], cwd: files.dir });
      } finally {
        closeSync(log);
      }
      child.once("error", (err) => done({ kind: "spawn-failed", message: err.message }));
      child.once("exit", () => done({ kind: "exited" }));
      child.on("message", (m: WorkerMessage) => {
        if (m.type === "recording") done({ kind: "recording" });
        else if (m.type === "failed") done({ kind: "failed", code: m.code, message: m.message });
      });
    });
  }

  async status(id: string): Promise<VideoSession> {
    const files = await this.files(id);
    const m = await files.readManifest();
    if (m?.manifest.finishedAt) await this.upload(id);
    return this.describe(files, {});
  }

  async stop(id: string, requestedBy: string, deadlineMs: number): Promise<VideoSession> {
    const files = await this.files(id);
    const rec = await files.readSession();
    let m = await files.readManifest();
    if (!m?.manifest.finishedAt) {
      if (!(await files.workerAlive(rec.nonce))) return this.describe(files, {});
      await files.requestStop(rec.nonce, requestedBy);
      const budget = Math.min(STOP_WAIT_MS, Math.max(0, deadlineMs - Date.now() - 1_000));
      m = await this.waitTerminal(files, budget);
      if (!m?.manifest.finishedAt) {
        return this.describe(files, { code: Errors.COMMAND_TIMEOUT.code, message: `the session was not final within ${Math.round(budget / 1000)} s; poll status or stop again` });
      }
    }
    await this.upload(id);
    return this.describe(files, {});
  }

  async inspect(id: string): Promise<InspectVideoResponse> {
    const files = await this.files(id);
    const rec = await files.readSession();
    const text = (p: string) => readFile(p, "utf8").catch((err: Error) => `(unreadable: ${err.message})`);
    const signal = () => AbortSignal.timeout(5_000);
    let remoteFile: string;
    let recorders: string;
    let verified = false;
    try {
      const ls = await shellV2(this.deps.adb, rec.serial, `ls -l ${rec.remotePath}`, signal());
      remoteFile = (ls.stdout.toString("utf8") + ls.stderr.toString("utf8")).trim();
    } catch (err) {
      remoteFile = `(device unreachable: ${(err as Error).message})`;
    }
    try {
      const found = await listRecorders(this.deps.adb, rec.serial, rec.remotePath, signal());
      recorders = found.map((l) => `${l.pid} ${l.startTime} ${l.args}`).join("\n");
      if (rec.recorder) verified = (await checkRecorder(this.deps.adb, rec.serial, rec.recorder, rec.remotePath, signal())).verdict === "match";
    } catch (err) {
      recorders = `(device unreachable: ${(err as Error).message})`;
    }
    return create(InspectVideoResponseSchema, {
      session: await this.describe(files, {}),
      sessionJson: await text(files.path("session.json")),
      heartbeatJson: await text(files.path("heartbeat.json")),
      lockJson: await text(rec.lockFile),
      remoteFile,
      recorderProcesses: recorders,
      recorderIdentityVerified: verified,
    });
  }

  /**
   * An operator's release of a session whose worker is gone: allowed only
   * when the device answers and no recorder for the session's path runs.
   */
  async release(id: string, by: string, reason: string): Promise<{ session: VideoSession; released: boolean; note: string }> {
    const files = await this.files(id);
    const rec = await files.readSession();
    // A finished session, or one released before, is never modified: a no-op that says so.
    const finished = (await files.readManifest())?.manifest.finishedAt;
    if (rec.recoveryState === "released" || (finished && rec.recoveryState !== "recovery_required")) {
      // A worker that ended between publishing its manifest and removing the lock saw its recorder end: the lock alone goes.
      const lockRemoved = rec.recoveryState === "none" && (await releaseVideoLock(rec.lockFile, rec.sessionId, rec.nonce));
      if (lockRemoved) this.deps.log.warn("finished video session's leftover lock removed on release", { sessionId: id, by });
      const note = rec.recoveryState === "released"
        ? `session ${id} was already released (${rec.recoveryReason ?? "no reason recorded"}); nothing changed`
        : `session ${id} is finished; nothing to release, its bundle is unchanged${lockRemoved ? " (its leftover recording lock was removed)" : ""}`;
      return { session: await this.describe(files, {}), released: false, note };
    }
    if (await files.workerAlive(rec.nonce)) {
      throw farmError(Errors.EVIDENCE_RECORDING_ACTIVE, `session ${id} has a live worker; stop it instead`, "session_id");
    }
    let running: number;
    try {
      running = (await listRecorders(this.deps.adb, rec.serial, rec.remotePath, AbortSignal.timeout(5_000))).length;
    } catch (err) {
      throw farmError(Errors.EVIDENCE_RECOVERY_REQUIRED, `cannot prove the recorder is gone: ${(err as Error).message}; reconnect ${rec.serial} and try again`, "session_id");
    }
    if (running > 0) {
      throw farmError(Errors.EVIDENCE_RECOVERY_REQUIRED, `a screenrecord for ${rec.remotePath} still runs on ${rec.serial}; it ends at its time limit (${rec.deadlineAt})`, "session_id");
    }
    await files.writeSession({ ...rec, recoveryState: "released", recoveryReason: `released by ${by}: ${reason || "no reason given"}` });
    const removed = await releaseVideoLock(rec.lockFile, rec.sessionId, rec.nonce);
    this.deps.log.warn("video session released by an operator", { sessionId: id, by, lockRemoved: removed });
    const note = removed ? `session ${id} released; the phone's recording lock was removed` : `session ${id} released; the phone's recording lock no longer named it`;
    return { session: await this.describe(files, {}), released: true, note };
  }

  /** Sessions whose worker heartbeat is fresh. */
  async liveWorkers(): Promise<number> {
    let names: string[] = [];
    try {
      names = await readdir(VideoSessionFiles.sessionsDir(this.deps.dataDir));
    } catch {
      return 0;
    }
    let live = 0;
    for (const id of names) {
      const files = VideoSessionFiles.of(this.deps.dataDir, id);
      const rec = await files.readSession().catch(() => undefined);
      if (rec && (await files.workerAlive(rec.nonce))) live++;
    }
    return live;
  }

  /**
   * Uploads the terminal bundles workers have marked as finished and not yet
   * stored: the marker goes once the upload succeeds, so this reads only
   * what is pending, not every session ever recorded.
   */
  async uploadFinished(): Promise<void> {
    let names: string[] = [];
    try {
      names = await readdir(VideoSessionFiles.finishedDir(this.deps.dataDir));
    } catch {
      return;
    }
    for (const id of names) await this.upload(id);
  }

  /** Upload one terminal bundle once; concurrent callers share the attempt. */
  upload(id: string): Promise<boolean> {
    const running = this.uploads.get(id);
    if (running) return running;
    const attempt = this.uploadOnce(id).finally(() => this.uploads.delete(id));
    this.uploads.set(id, attempt);
    return attempt;
  }

  private async uploadOnce(id: string): Promise<boolean> {
    const files = VideoSessionFiles.of(this.deps.dataDir, id);
    const marker = files.finishedMarker();
    if (await files.uploaded()) {
      await rm(marker, { force: true });
      return true;
    }
    const m = await files.readManifest();
    if (!m?.manifest.finishedAt) return false;
    const rec = await files.readSession();
    try {
      await uploadBundle(this.deps.transport, {
        evidenceId: id,
        agentId: this.deps.agent.id,
        serial: rec.serial,
        physicalId: rec.physicalId,
        kind: "video",
        dir: files.dir,
        files: m.manifest.artifacts.map((a) => a.path).filter((p): p is string => p !== null),
      });
    } catch (err) {
      // "Already exists" is an upload only when the stored manifest is this one, which
      // uploadBundle checks; anything else keeps the session's files for another try.
      const r = toErrorReport(err);
      this.deps.log.warn("video bundle upload failed; retried on the next status, stop or attach", { sessionId: id, code: r.code, error: r.message });
      return false;
    }
    await files.markUploaded(id);
    await rm(marker, { force: true });
    this.deps.log.info("video bundle stored", { sessionId: id, status: m.manifest.status });
    return true;
  }

  private async files(id: string): Promise<VideoSessionFiles> {
    validateSessionId(id);
    const files = VideoSessionFiles.of(this.deps.dataDir, id);
    if (!(await files.exists())) throw farmError(Errors.EVIDENCE_SESSION_NOT_FOUND, `no video session ${id} on this agent`, "session_id");
    return files;
  }

  /** Waits for the terminal manifest (a watcher, with a slow poll behind it). */
  private async waitTerminal(files: VideoSessionFiles, ms: number): Promise<{ text: string; manifest: EvidenceManifest } | null> {
    const terminal = await waitForChange(files.dir, async () => {
      const m = await files.readManifest();
      return m?.manifest.finishedAt ? m : undefined;
    }, { timeoutMs: ms });
    return terminal ?? (await files.readManifest());
  }

  /** The session as the API reports it, from its files alone. */
  private async describe(files: VideoSessionFiles, extra: { code?: string; message?: string }): Promise<VideoSession> {
    const rec = await files.readSession();
    const m = await files.readManifest();
    const alive = await files.workerAlive(rec.nonce);
    const { status, code, message } = videoStatus(rec, m?.manifest ?? null, alive, extra);
    return create(VideoSessionSchema, {
      sessionId: rec.sessionId,
      status,
      workerAvailable: alive,
      code,
      message,
      manifestJson: m?.text ?? "",
      serial: rec.serial,
      physicalId: rec.physicalId,
      agentId: rec.agentId,
      stored: await files.uploaded(),
      recoveryState: rec.recoveryState,
      createTime: timestampFromMs(Date.parse(rec.createdAt)),
      updateTime: timestampFromMs(Date.now()),
      ...(rec.state === "recording" ? { deadline: timestampFromMs(Date.parse(rec.deadlineAt)) } : {}),
    });
  }
}

function issuedSessionId(id: string): string {
  if (id === "") throw invalidArgument("session_id", "the coordinator issues video session ids; this request carries none (an older coordinator?)");
  return validateSessionId(id);
}

function startupFailureManifest(rec: VideoSessionRecord, message: string, metadataErrors: EvidenceError[]): EvidenceManifest {
  return videoManifest(rec, {
    startedAt: rec.createdAt,
    finishedAt: new Date().toISOString(),
    status: "failed",
    artifacts: [],
    errors: [...metadataErrors, { code: "VIDEO_STARTUP_FAILED", stage: "startup", message, component: "agent" }],
    // No recorder was started, so nothing was left on the phone.
    video: { ...initialVideo(rec), stopReason: "startup_failure", remoteRetained: false },
  });
}
