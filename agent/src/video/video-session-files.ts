import { createHash, randomUUID } from "node:crypto";
import { readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { writeFileDurably } from "@farm/shared/durable-file";
import type { EvidenceDevice, EvidenceError, EvidenceManifest } from "@farm/shared/evidence-manifest";
import { ensurePrivateDir, writePrivateFile } from "@farm/shared/secure-file";
import type { Size } from "@farm/shared/video-options";

/** A worker whose heartbeat is older than this is taken as gone. */
export const HEARTBEAT_STALE_MS = 3_000;
export const HEARTBEAT_INTERVAL_MS = 500;

export type WorkerState = "starting" | "recording" | "finalizing" | "terminal";
export type RecoveryState = "none" | "recovery_required" | "released";

/** The remote recorder as identified once it was found live. */
export interface RecorderIdentity {
  pid: number;
  /** ps STIME at discovery: with the pid and the unique path, the process's identity. */
  startTime: string;
  args: string;
}

/**
 * session.json: everything needed to find, verify and recover a recording,
 * kept apart from the manifest. The agent writes the first version; from
 * then on only the worker writes it, except an operator's release of a
 * session whose worker is gone.
 */
export interface VideoSessionRecord {
  sessionId: string;
  /** Random; binds heartbeats and stop requests to this worker. */
  nonce: string;
  serial: string;
  physicalId: string;
  agentId: string;
  adb: { host: string; port: number };
  durationSeconds: number;
  requestedSize: Size;
  display: { width: number; height: number; rotation: number | null };
  label: string | null;
  context: Record<string, unknown>;
  remotePath: string;
  createdAt: string;
  /** When the device's time limit ends the recording (host clock, approximate). */
  deadlineAt: string;
  state: WorkerState;
  worker: { pid: number; startIdentity: string | null } | null;
  recorder: RecorderIdentity | null;
  recoveryState: RecoveryState;
  recoveryReason: string | null;
  lockFile: string;
  device: EvidenceDevice;
  /** Metadata that could not be read at start; they make usable video partial. */
  metadataErrors: EvidenceError[];
}

export interface Heartbeat {
  nonce: string;
  pid: number;
  seq: number;
  atMs: number;
  /** Written once, when the worker is done and about to exit. */
  final?: boolean;
}

export interface StopRequest {
  nonce: string;
  requestId: string;
  requestedAtMs: number;
  requestedBy: string;
}

/** The files of one session directory; every write is atomic and 0600. */
export class VideoSessionFiles {
  constructor(readonly dir: string) {}

  static root(dataDir: string): string {
    return join(dataDir, "video");
  }

  static sessionsDir(dataDir: string): string {
    return join(dataDir, "video", "sessions");
  }

  /** Markers a worker drops when its bundle is terminal, so the agent can upload it. */
  static finishedDir(dataDir: string): string {
    return join(dataDir, "video", "finished");
  }

  static of(dataDir: string, sessionId: string): VideoSessionFiles {
    return new VideoSessionFiles(join(VideoSessionFiles.sessionsDir(dataDir), sessionId));
  }

  /** The marker a worker drops when this session's bundle is terminal (see finishedDir). */
  finishedMarker(): string {
    return join(this.dir, "..", "..", "finished", basename(this.dir));
  }

  path(name: string): string {
    return join(this.dir, name);
  }

  async exists(): Promise<boolean> {
    return stat(this.path("session.json")).then(
      () => true,
      () => false,
    );
  }

  async readSession(): Promise<VideoSessionRecord> {
    return JSON.parse(await readFile(this.path("session.json"), "utf8")) as VideoSessionRecord;
  }

  async writeSession(record: VideoSessionRecord): Promise<void> {
    await writePrivateFile(this.path("session.json"), JSON.stringify(record, null, 2) + "\n");
  }

  async readManifest(): Promise<{ text: string; manifest: EvidenceManifest } | null> {
    try {
      const text = await readFile(this.path("manifest.json"), "utf8");
      return { text, manifest: JSON.parse(text) as EvidenceManifest };
    } catch {
      return null;
    }
  }

  /** Published whole and durably (temp name, fsync, rename, directory fsync): readers judge the session by it. */
  async writeManifest(manifest: EvidenceManifest): Promise<void> {
    await writeFileDurably(this.path("manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
  }

  async writeHeartbeat(hb: Heartbeat): Promise<void> {
    await writePrivateFile(this.path("heartbeat.json"), JSON.stringify(hb));
  }

  async readHeartbeat(): Promise<Heartbeat | null> {
    try {
      return JSON.parse(await readFile(this.path("heartbeat.json"), "utf8")) as Heartbeat;
    } catch {
      return null;
    }
  }

  /** Is the worker bound to this nonce alive (a fresh heartbeat carrying it)? */
  async workerAlive(nonce: string, now = Date.now()): Promise<boolean> {
    const hb = await this.readHeartbeat();
    return hb !== null && hb.nonce === nonce && hb.final !== true && now - hb.atMs < HEARTBEAT_STALE_MS;
  }

  /** Each stop request is its own file, so concurrent stops never overwrite each other. */
  async requestStop(nonce: string, requestedBy: string): Promise<StopRequest> {
    const req: StopRequest = { nonce, requestId: randomUUID(), requestedAtMs: Date.now(), requestedBy };
    await writePrivateFile(join(this.dir, "stop-requests", `${req.requestId}.json`), JSON.stringify(req));
    return req;
  }

  /** Stop requests carrying this nonce; requests bound to another worker are ignored. */
  async stopRequests(nonce: string): Promise<StopRequest[]> {
    let names: string[];
    try {
      names = await readdir(join(this.dir, "stop-requests"));
    } catch {
      return [];
    }
    const out: StopRequest[] = [];
    for (const name of names.filter((n) => n.endsWith(".json"))) {
      try {
        const req = JSON.parse(await readFile(join(this.dir, "stop-requests", name), "utf8")) as StopRequest;
        if (req.nonce === nonce) out.push(req);
      } catch {
        // Half-written by a writer that died: not a request.
      }
    }
    return out;
  }

  async markUploaded(evidenceId: string): Promise<void> {
    await writePrivateFile(this.path("uploaded.json"), JSON.stringify({ evidenceId, atMs: Date.now() }));
  }

  async uploaded(): Promise<boolean> {
    return stat(this.path("uploaded.json")).then(
      () => true,
      () => false,
    );
  }
}

/**
 * The per-phone recording lock: a file created exclusively in the host-wide
 * lock dir, so a second recording of the same phone (any alias, any agent on
 * this host) is refused. It is not an OS lock on purpose: it outlives a
 * worker that dies, and only the worker that finished, or an operator's
 * release after checks, removes it. There is no takeover by age.
 */
export interface VideoLockHolder {
  sessionId: string;
  nonce: string;
  physicalId: string;
  agentId: string;
  dataDir: string;
  createdAt: string;
}

export function videoLockFile(lockDir: string, physicalId: string): string {
  return join(lockDir, `video-${createHash("sha256").update(physicalId).digest("hex").slice(0, 32)}.json`);
}

/** Creates the lock, or returns the current holder. */
export async function acquireVideoLock(file: string, holder: VideoLockHolder): Promise<{ acquired: true } | { acquired: false; holder: VideoLockHolder | null }> {
  try {
    await writeFile(file, JSON.stringify(holder), { flag: "wx", mode: 0o600 });
    return { acquired: true };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    return { acquired: false, holder: await readVideoLock(file) };
  }
}

export async function readVideoLock(file: string): Promise<VideoLockHolder | null> {
  try {
    return JSON.parse(await readFile(file, "utf8")) as VideoLockHolder;
  } catch {
    return null;
  }
}

/** Removes the lock only if it still names this session and nonce. */
export async function releaseVideoLock(file: string, sessionId: string, nonce: string): Promise<boolean> {
  const holder = await readVideoLock(file);
  if (!holder || holder.sessionId !== sessionId || holder.nonce !== nonce) return false;
  await rm(file, { force: true });
  return true;
}

export async function ensureVideoDirs(dataDir: string): Promise<void> {
  await ensurePrivateDir(VideoSessionFiles.sessionsDir(dataDir));
  await ensurePrivateDir(VideoSessionFiles.finishedDir(dataDir));
}
