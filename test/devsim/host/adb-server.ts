import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { adbBinary, runAdb } from "./adb-cli.js";
import { findFreePort } from "./free-port.js";
import { hostRequest } from "./host-client.js";
import { killWithThisProcess } from "./kill-with-this-process.js";

export interface AdbServer {
  port: number;
  pid: number;
  /** process.env plus ANDROID_ADB_SERVER_PORT, for child processes that should use this server. */
  env: NodeJS.ProcessEnv;
  /** The server's own log (stdout+stderr), for diagnostics. */
  log(): string;
  /** `adb kill-server`, then makes sure the process is gone; removes its temp HOME. */
  stop(): Promise<void>;
}

export interface StartAdbServerOptions {
  /** Fixed port; default: a free one (never 5037 or 5555–5585). */
  port?: number;
  /** How long to wait for the server to answer (default 10 s). */
  timeoutMs?: number;
}

const LOG_LIMIT = 256 * 1024;
const READY_POLL_MS = 20;

/**
 * Starts a private, real adb server (`adb -P PORT nodaemon server`) as our own
 * child, so its pid is known and it can be reaped. Its HOME is a temp dir so
 * the adbkey it generates and its state files never touch the user's ~/.android.
 */
export async function startAdbServer(options: StartAdbServerOptions = {}): Promise<AdbServer> {
  const attempts = options.port === undefined ? 3 : 1;
  let lastError: unknown;
  for (let attempt = 0; attempt < attempts; attempt++) {
    const port = options.port ?? (await findFreePort());
    try {
      return await startOn(port, options.timeoutMs ?? 10_000);
    } catch (error) {
      // The free port may have been taken between probing and binding; try another.
      lastError = error;
    }
  }
  throw lastError;
}

async function startOn(port: number, timeoutMs: number): Promise<AdbServer> {
  const home = await mkdtemp(join(tmpdir(), "devsim-adb-"));
  const env = { ...process.env, ANDROID_ADB_SERVER_PORT: String(port) };
  const child = spawn(adbBinary(), ["-P", String(port), "nodaemon", "server"], {
    env: { ...env, HOME: home },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  const append = (chunk: Buffer) => {
    log = (log + chunk.toString("utf8")).slice(-LOG_LIMIT);
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else {
      child.once("exit", () => resolve());
      child.once("error", () => resolve()); // spawn failure: there is no process to wait for
    }
  });
  const spawnError = new Promise<never>((_, reject) => child.once("error", reject));
  void spawnError.catch(() => {});

  // If this process ends without stop() (a vitest worker is ended by a signal: no "exit" handler
  // runs), the server and its HOME go with it.
  const orphanGuard = child.pid === undefined ? undefined : killWithThisProcess(child.pid, { removeDir: home });
  void exited.then(() => orphanGuard?.release());

  let stopped: Promise<void> | undefined;
  const stop = () => (stopped ??= (async () => {
    await shutDown(child, port, exited);
    await rm(home, { recursive: true, force: true });
  })());

  try {
    await Promise.race([waitUntilAnswering(port, timeoutMs, exited, () => log), spawnError]);
  } catch (error) {
    await stop();
    throw error;
  }
  return { port, pid: child.pid!, env, log: () => log, stop };
}

/** Polls `host:version` (there is no readiness event) until it answers. */
async function waitUntilAnswering(port: number, timeoutMs: number, exited: Promise<void>, log: () => string): Promise<void> {
  let hasExited = false;
  void exited.then(() => (hasExited = true));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await hostRequest(port, "host:version");
      return;
    } catch {
      // Not listening yet.
    }
    if (hasExited) throw new Error(`adb server on port ${port} exited during startup:\n${log()}`);
    if (Date.now() > deadline) throw new Error(`adb server on port ${port} did not answer within ${timeoutMs} ms:\n${log()}`);
    await delay(READY_POLL_MS);
  }
}

async function shutDown(child: ChildProcess, port: number, exited: Promise<void>): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    await runAdb(port, ["kill-server"], { timeoutMs: 5_000 }).catch(() => undefined);
    const gone = await Promise.race([exited.then(() => true), delay(5_000, undefined, { ref: false }).then(() => false)]);
    if (!gone) {
      child.kill("SIGKILL");
      await exited;
    }
  }
}

/**
 * Makes sure one adb server answers on `port` before anything connects to
 * it: if none does, `adb start-server` starts one (a daemon, as the adb CLI
 * would) and this waits until it answers. N `adb connect` calls that each
 * find no server each try to start one, and the losers fail with
 * "cannot connect to daemon".
 */
export async function ensureAdbServer(port: number, timeoutMs = 10_000): Promise<void> {
  const answering = () => hostRequest(port, "host:version").then(() => true, () => false);
  if (await answering()) return;
  const started = await runAdb(port, ["start-server"], { timeoutMs });
  const deadline = Date.now() + timeoutMs;
  // start-server returns once the daemon said it is up; still, ask it.
  while (!(await answering())) {
    if (Date.now() > deadline) throw new Error(`no adb server answers on port ${port} (adb start-server exited ${started.code}: ${`${started.stdout}${started.stderr}`.trim()})`);
    await delay(READY_POLL_MS);
  }
}
