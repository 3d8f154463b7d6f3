import { randomBytes, randomUUID } from "node:crypto";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { shellV2, type ShellResult } from "../adb/adb-shell.js";
import { listRecorders } from "../video/recorder-identity.js";
import { pullRemoteFile } from "../video/remote-pull.js";

/** Longest a step's video may run (screenrecord's own time limit is the backstop). */
const TIME_LIMIT_S = 180;
const STARTUP_MS = 3_000;
/** How long stop waits for the recorder to finish its file after SIGINT, before it hangs up. */
const STOP_WAIT_MS = 10_000;
const PULL_MS = 60_000;

export interface StepVideoResult {
  /** The finished MP4, pulled into a 0600 file in the staging dir: the caller sends it and removes it. */
  file?: string;
  /** Why there is no video: the recorder did not start, stop or finish, or the pull failed. */
  warning?: string;
}

export interface StepVideo {
  stop(): Promise<StepVideoResult>;
}

/**
 * A screen recording around one step: screenrecord on a stream this agent
 * owns, proven live by finding it (by its unique output path) before the
 * action starts, stopped with SIGINT once the step has settled so it
 * finalizes its file, then pulled and removed from the phone.
 */
export async function startStepVideo(adb: AdbServerAddress, serial: string, stagingDir: string): Promise<StepVideo> {
  const remote = `/data/local/tmp/farm-step-${randomBytes(6).toString("hex")}.mp4`;
  const hangUp = new AbortController();
  let end: ShellResult | Error | undefined;
  const ended = shellV2(adb, serial, `screenrecord --time-limit ${TIME_LIMIT_S} ${remote}`, hangUp.signal).then(
    (r) => (end = r),
    (e: Error) => (end = e),
  );
  const cleanup = () => shellV2(adb, serial, `rm -f ${remote}`, AbortSignal.timeout(5_000)).catch(() => undefined);
  let pid: number | undefined;
  const until = Date.now() + STARTUP_MS;
  while (!end && pid === undefined && Date.now() < until) {
    const found = await listRecorders(adb, serial, remote, AbortSignal.timeout(STARTUP_MS)).catch(() => []);
    if (found.length === 1) pid = found[0]?.pid;
    else await Promise.race([ended, new Promise((r) => setTimeout(r, 50))]);
  }
  if (pid === undefined) {
    hangUp.abort();
    await ended;
    void cleanup();
    const why = end instanceof Error ? end.message : end ? `screenrecord exited with ${end.exitCode}: ${end.stderr.toString("utf8").trim().slice(0, 300)}` : `no recorder writing ${remote} appeared within ${STARTUP_MS} ms`;
    throw new Error(`the step's video did not start: ${why}`);
  }
  const recorder = pid;
  return {
    async stop() {
      try {
        if (!end) await shellV2(adb, serial, `kill -INT ${recorder}`, AbortSignal.timeout(5_000)).catch(() => undefined);
        await Promise.race([ended, new Promise((r) => setTimeout(r, STOP_WAIT_MS))]);
        if (!end) {
          hangUp.abort();
          return { warning: `the recorder did not finish within ${STOP_WAIT_MS / 1000} s of SIGINT; the video is dropped` };
        }
        if (end instanceof Error) return { warning: `the stream to the recorder broke (${end.message}); the video is dropped` };
        if (end.exitCode !== 0) return { warning: `screenrecord exited with ${end.exitCode}; the video is dropped` };
        await mkdir(stagingDir, { recursive: true, mode: 0o700 });
        const local = join(stagingDir, `step-video-${randomUUID()}.mp4`);
        try {
          await pullRemoteFile(adb, serial, remote, local, PULL_MS);
          return { file: local };
        } catch (err) {
          await rm(local, { force: true });
          return { warning: `pulling the video failed (${(err as Error).message}); the video is dropped` };
        }
      } finally {
        void cleanup();
      }
    },
  };
}
