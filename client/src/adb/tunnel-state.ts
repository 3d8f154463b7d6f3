import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { readdir, readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { defaultFarmHome } from "@farm/shared/paths";
import { ensurePrivateDir, writePrivateFile } from "@farm/shared/secure-file";
import type { LocalAdb } from "./local-adb-cli.js";

/**
 * What this machine knows of a tunnel it serves: one JSON file per tunnel
 * under $FARM_HOME/adb-tunnels/, written by the process serving it once the
 * local adb server is connected, removed when it stops. It holds the
 * serving process's pid and start time (so a reused pid is never killed)
 * and no secrets.
 */
export interface TunnelState {
  tunnelId: string;
  /** The local adb serial: 127.0.0.1:PORT. */
  serial: string;
  port: number;
  /** The phone's serial on its agent. */
  device: string;
  agent: string;
  physicalId: string;
  leaseId: string;
  coordinator: string;
  /** The adb server `adb connect` went to; null: adb's default. */
  adbServerPort: number | null;
  /** Its ADB_SERVER_SOCKET, when it was reached by one; absent in states written before it was recorded. */
  adbServerSocket?: string | null;
  pid: number;
  /** The serving process's start time as the OS reports it; null where it cannot be read. */
  pidStart: string | null;
  foreground: boolean;
  startedAt: string;
  /** The background process's log; null in the foreground. */
  log: string | null;
}

/** The adb server a tunnel's serial was connected to, to reach it again (an older state without a socket inherits this process's). */
export function localAdbOf(state: TunnelState, env?: NodeJS.ProcessEnv): LocalAdb {
  return { serverPort: state.adbServerPort ?? undefined, env, ...(state.adbServerSocket !== undefined ? { serverSocket: state.adbServerSocket } : {}) };
}

export function tunnelsDir(env: NodeJS.ProcessEnv): string {
  return join(defaultFarmHome(env), "adb-tunnels");
}

/** A file name for a tunnel id (coordinator ids are UUIDs; anything else is made safe). */
function fileStem(tunnelId: string): string {
  return /^[A-Za-z0-9._-]{1,128}$/.test(tunnelId) && !tunnelId.startsWith(".") ? tunnelId : Buffer.from(tunnelId).toString("base64url").slice(0, 128);
}

export function statePath(env: NodeJS.ProcessEnv, tunnelId: string): string {
  return join(tunnelsDir(env), `${fileStem(tunnelId)}.json`);
}

export function logPath(env: NodeJS.ProcessEnv, name: string): string {
  return join(tunnelsDir(env), `${fileStem(name)}.log`);
}

export async function ensureTunnelsDir(env: NodeJS.ProcessEnv): Promise<string> {
  const dir = tunnelsDir(env);
  await ensurePrivateDir(dir);
  return dir;
}

export async function writeTunnelState(env: NodeJS.ProcessEnv, state: TunnelState): Promise<void> {
  await ensureTunnelsDir(env);
  await writePrivateFile(statePath(env, state.tunnelId), JSON.stringify(state, null, 2) + "\n");
}

export async function removeTunnelState(env: NodeJS.ProcessEnv, tunnelId: string): Promise<void> {
  await rm(statePath(env, tunnelId), { force: true });
}

function isState(v: unknown): v is TunnelState {
  const s = v as Partial<TunnelState> | null;
  return typeof s === "object" && s !== null && typeof s.tunnelId === "string" && typeof s.serial === "string" && typeof s.pid === "number" && Number.isInteger(s.pid) && s.pid > 0;
}

/** Every tunnel state file; unreadable or malformed ones are skipped. */
export async function readTunnelStates(env: NodeJS.ProcessEnv): Promise<TunnelState[]> {
  let names: string[];
  try {
    names = await readdir(tunnelsDir(env));
  } catch {
    return [];
  }
  const states: TunnelState[] = [];
  for (const name of names.filter((n) => n.endsWith(".json")).sort()) {
    try {
      const parsed = JSON.parse(await readFile(join(tunnelsDir(env), name), "utf8")) as unknown;
      if (isState(parsed)) states.push(parsed);
    } catch {
      // Being written or damaged: not a tunnel we can act on.
    }
  }
  return states;
}

interface ProcessInfo {
  /** The start time as the OS reports it: with the pid, it names one process, so a reused pid is told apart. */
  start: string;
  /** Exited, not yet reaped: a detached process's new parent may take a while. */
  zombie: boolean;
}

/** Field 3 (state) and 22 (start time, clock ticks since boot) of /proc/PID/stat on Linux, else `ps`. */
function processInfo(pid: number): ProcessInfo | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const start = fields[19];
    return start ? { start, zombie: fields[0] === "Z" || fields[0] === "X" } : null;
  } catch {
    // No procfs (macOS): ask ps.
  }
  const ps = spawnSync("ps", ["-o", "stat=,lstart=", "-p", String(pid)], { encoding: "utf8" });
  const m = ps.status === 0 ? /^\s*(\S+)\s+(.+?)\s*$/.exec(ps.stdout) : null;
  return m ? { start: m[2] as string, zombie: (m[1] as string).startsWith("Z") } : null;
}

/** This process's start time, for its state file. */
export function processStart(pid: number): string | null {
  return processInfo(pid)?.start ?? null;
}

/** True while the process runs (a zombie has exited). */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    // ESRCH: gone; EPERM: another user's, never ours.
    return false;
  }
  const info = processInfo(pid);
  return info !== null && !info.zombie;
}

/** True when the state's pid is still the very process that wrote it, and running. */
export function isServingProcess(state: TunnelState): boolean {
  if (state.pidStart === null || !isRunning(state.pid)) return false;
  return processInfo(state.pid)?.start === state.pidStart;
}

/**
 * True when the state's serving process is provably gone: not running, or
 * its pid now names another process (a different start time). Its
 * serial may still sit `offline` in the adb server, on a port anyone on
 * this machine can bind.
 */
export function isStale(state: TunnelState): boolean {
  if (!isRunning(state.pid)) return true;
  return state.pidStart !== null && processStart(state.pid) !== state.pidStart;
}

/** Logs of background processes are kept for a week after their last line: long enough to read why a tunnel closed. */
const LOG_KEEP_MS = 7 * 24 * 3600_000;

export async function pruneOldLogs(env: NodeJS.ProcessEnv, now = Date.now()): Promise<void> {
  const dir = tunnelsDir(env);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return;
  }
  for (const name of names.filter((n) => n.endsWith(".log"))) {
    const path = join(dir, name);
    try {
      if (now - (await stat(path)).mtimeMs > LOG_KEEP_MS) await rm(path, { force: true });
    } catch {
      // Gone meanwhile.
    }
  }
}
