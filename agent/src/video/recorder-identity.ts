import type { AdbServerAddress } from "../adb/adb-client.js";
import { shellV2 } from "../adb/adb-shell.js";
import type { RecorderIdentity } from "./video-session-files.js";

export interface PsLine {
  pid: number;
  startTime: string;
  args: string;
}

/** `ps -A -o PID,STIME,ARGS` output (ARGS last: it may hold spaces). */
export function parsePs(text: string): PsLine[] {
  const out: PsLine[] = [];
  for (const line of text.split("\n").slice(1)) {
    const m = /^\s*(\d+)\s+(\S+)\s+(.*\S)\s*$/.exec(line);
    if (m) out.push({ pid: Number(m[1]), startTime: m[2]!, args: m[3]! });
  }
  return out;
}

/** screenrecord processes writing to exactly this (unique) remote path. */
export function recordersOf(lines: PsLine[], remotePath: string): PsLine[] {
  return lines.filter((l) => /^(\S*\/)?screenrecord\s/.test(l.args) && l.args.split(/\s+/).includes(remotePath));
}

export async function listRecorders(adb: AdbServerAddress, serial: string, remotePath: string, signal: AbortSignal): Promise<PsLine[]> {
  const r = await shellV2(adb, serial, "ps -A -o PID,STIME,ARGS", signal);
  if (r.exitCode !== 0) throw new Error(`ps failed (exit ${r.exitCode}): ${r.stderr.toString("utf8").trim()}`);
  return recordersOf(parsePs(r.stdout.toString("utf8")), remotePath);
}

export type IdentityCheck = { verdict: "match" } | { verdict: "gone" } | { verdict: "mismatch"; found: PsLine[] };

/**
 * Is the stored recorder still the process with that pid? Its command must
 * name the unique output path and its start time must be the one stored:
 * a reused pid fails both.
 */
export async function checkRecorder(adb: AdbServerAddress, serial: string, identity: RecorderIdentity, remotePath: string, signal: AbortSignal): Promise<IdentityCheck> {
  const r = await shellV2(adb, serial, "ps -A -o PID,STIME,ARGS", signal);
  if (r.exitCode !== 0) throw new Error(`ps failed (exit ${r.exitCode}): ${r.stderr.toString("utf8").trim()}`);
  const lines = parsePs(r.stdout.toString("utf8"));
  const same = lines.find((l) => l.pid === identity.pid);
  const recorders = recordersOf(lines, remotePath);
  if (same && same.startTime === identity.startTime && same.args === identity.args && recorders.some((l) => l.pid === identity.pid)) return { verdict: "match" };
  if (!same && recorders.length === 0) return { verdict: "gone" };
  return { verdict: "mismatch", found: same ? [same, ...recorders] : recorders };
}
