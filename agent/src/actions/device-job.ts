import { Errors } from "@farm/shared/errors";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { shellV2, type ShellResult } from "../adb/adb-shell.js";
import { DispatchFailure, type DispatchProgress } from "../ownership/device-ownership.js";
import type { ActionRow } from "../ownership/ownership-journal.js";
import { shQuote } from "./shell-quote.js";
import { toDispatchFailure } from "./shell-outcome.js";

/** Where the phone keeps the files of each job: command marker, output and completion record. */
export const JOB_DIR = "/data/local/tmp/farm-jobs";
/** Jobs kept on a phone at most; acknowledged ones are removed at once, so only orphans pile up. */
export const JOB_STORE_LIMIT = 512;

/**
 * The script's exit status, with nothing on stdout, when it stopped before
 * starting the job. On every other path the script's first stdout line is
 * its own (a record line, for statuses of 128 and up), so no command's
 * output can pass for this.
 */
const NOT_STARTED = 254;

/**
 * A completion record. Version 2 is written in place and ends with "end",
 * so a torn write never reads as a record; version 1 (published by a rename)
 * is still read from jobs an older agent started.
 */
const RECORD = /^farm-job (?:1 ([0-9a-f-]{36}) ([0-9a-f]{64}) (\d{1,3})|2 ([0-9a-f-]{36}) ([0-9a-f]{64}) (\d{1,3}) end)$/;

/** Action id, request hash and exit status of a completion record line, or undefined. */
function parseRecord(line: string): { actionId: string; sha: string; exitCode: number } | undefined {
  const m = RECORD.exec(line);
  if (!m) return undefined;
  return m[1] !== undefined ? { actionId: m[1], sha: m[2] as string, exitCode: Number(m[3]) } : { actionId: m[4] as string, sha: m[5] as string, exitCode: Number(m[6]) };
}

/**
 * A job's files share one base name: creation time first, so a plain `ls`
 * lists them oldest first, then the action id that binds them to it.
 */
export function jobBase(action: Pick<ActionRow, "actionId" | "createdAt">): string {
  return `${JOB_DIR}/${action.createdAt}-${action.actionId}`;
}

export interface JobResult extends ShellResult {
  /** What proves the outcome on the live stream (a receipt's provenBy). */
  provenBy: string;
  /** The completion record's line, when the agent read it (exit status 128 or more); null when the status alone proved it. */
  record: string | null;
}

/** The job's own exit status when its record could not be written (and one a job may also give itself). */
const RECORD_UNWRITTEN = 255;
/** From here up a status proves nothing alone (255 above; 128+N: a job killed by signal N, record or not). */
const FIRST_UNPROVEN = 128;

/**
 * Runs a shell mutation as a detached job on the phone (its own files; it
 * keeps running when the adb stream, the deadline or the agent goes away)
 * that writes a completion record (action id, request hash, exit status)
 * when it ends. The caller waits for it on the same stream; if the wait is
 * cut, reconcile settles the action from that record once it exists.
 * Nothing is ever started twice for one action.
 */
export async function runDeviceJob(
  adb: AdbServerAddress,
  serial: string,
  command: string,
  action: ActionRow,
  signal: AbortSignal,
  progress: DispatchProgress,
  /** Files of settled jobs to remove on the way (saves the phone a round trip per action). */
  removeFirst: readonly string[] = [],
): Promise<JobResult> {
  const j = jobBase(action);
  // Each program a phone starts costs it a fork and exec (milliseconds on a
  // phone, devsim's latency profiles): the job uses mksh itself where it can.
  // A background subshell that ignores SIGHUP is what nohup gives, without
  // starting nohup and sh; the command runs by eval in a subshell of its own,
  // so its `exit` ends only it, as `sh -c` did; the record is written in
  // place (ended by "end"). Settled jobs' files are removed alongside.
  //
  // The phone sends nothing before the exit status: each packet it sends
  // costs a round trip of adb's flow control, and on a fast command that is
  // most of what a job adds. The job exits with the command's status once
  // its record is written (255 if it could not be), and the script passes a
  // status on only when that record exists, so the status proves the
  // outcome. A status of 128 or more is not proof alone (a command may exit
  // 255 itself; a job killed by a signal before its record gives 128+N):
  // then the record is the first line sent back, and read. 254 with nothing
  // on stdout is the script stopping before the job: nothing ran. If the
  // stream is cut first, the job's `.run` mark (its first act) tells whether
  // it started.
  const record = `farm-job 2 ${action.actionId} ${action.requestSha256}`;
  const job = `( trap '' HUP; : > ${j}.run || exit ${RECORD_UNWRITTEN}; (eval ${shQuote(command)}); farm_s=$?; echo "${record} $farm_s end" > ${j}.done || exit ${RECORD_UNWRITTEN}; exit $farm_s ) </dev/null >${j}.out 2>${j}.err &`;
  const script = [
    // Not waited for (it outlives the session, as the job does): a program the phone starts costs it milliseconds.
    ...(removeFirst.length > 0 ? [`( trap '' HUP; rm -f ${removeFirst.join(" ")} ) </dev/null >/dev/null 2>&1 &`] : []),
    `[ -d ${JOB_DIR} ] || mkdir -p ${JOB_DIR} || exit ${NOT_STARTED}`,
    // A job is started once per action: an existing marker means it was.
    `if [ -e ${j}.job ]; then echo "farm: ${j}.job exists" >&2; exit ${NOT_STARTED}; fi`,
    `echo ${shQuote(`${action.actionId} ${action.requestSha256}`)} > ${j}.job || exit ${NOT_STARTED}`,
    job,
    "wait $!",
    "farm_status=$?",
    // Only a job that wrote its record gives its status: not one whose output file, or fork, failed before its command ran.
    `[ -s ${j}.done ] || farm_status=${RECORD_UNWRITTEN}`,
    `if [ $farm_status -ge ${FIRST_UNPROVEN} ]; then read -r farm_record < ${j}.done; echo "$farm_record"; fi`,
    `[ -s ${j}.out ] && cat ${j}.out`,
    `[ -s ${j}.err ] && cat ${j}.err >&2`,
    "exit $farm_status",
  ].join("\n");
  progress.phase = "sent";
  let r: ShellResult;
  try {
    r = await shellV2(adb, serial, script, signal);
  } catch (err) {
    const failure = toDispatchFailure(err);
    if (failure.dispatched === false) throw failure;
    // Cut before the exit status: the job may or may not have started. Its own marker says whether it did.
    if (await jobStarted(adb, serial, action, progress.released)) {
      progress.phase = "accepted";
      throw new DispatchFailure(failure.message, true, failure.error);
    }
    throw new DispatchFailure(failure.message, null, failure.error);
  }
  if (r.exitCode === NOT_STARTED && r.stdout.length === 0) {
    // The script stopped before starting the job: nothing ran.
    throw new DispatchFailure(`the job could not be started on the phone: ${r.stderr.toString("utf8").trim() || `exit ${r.exitCode}`}`, false, Errors.DEVICE_JOB_START_FAILED);
  }
  if (r.exitCode < FIRST_UNPROVEN) {
    progress.phase = "accepted";
    return { ...r, provenBy: `job exit status (after its completion record ${j}.done was written)`, record: null };
  }
  const out = r.stdout;
  const nl = out.indexOf(10);
  const line = out.subarray(0, nl < 0 ? out.length : nl).toString("utf8");
  const rec = parseRecord(line);
  if (!rec || rec.actionId !== action.actionId || rec.sha !== action.requestSha256) {
    // No record: the job's own mark says whether it started (its output file or its fork may have failed first).
    const started = await jobStarted(adb, serial, action, progress.released);
    if (started) progress.phase = "accepted";
    throw new DispatchFailure(`the job ended without a valid completion record (${JSON.stringify(line.slice(0, 120))})`, started || null, Errors.DEVICE_JOB_RECORD_MISSING);
  }
  progress.phase = "accepted";
  return { exitCode: rec.exitCode, stdout: nl < 0 ? Buffer.alloc(0) : out.subarray(nl + 1), stderr: r.stderr, truncated: r.truncated, provenBy: `job completion record ${j}.done`, record: line };
}

/**
 * Whether a cut job started, from its `.run` mark (its first act): true when
 * the mark is there; false when the phone says it is not, or could not be
 * asked. Both false verdicts leave "dispatched" unknown to the caller, never
 * "not dispatched". The probe has no deadline of its own (a margin that a
 * loaded host or a slow phone overruns would turn "started" into
 * "unknown"): it runs until the phone answers or the action is released,
 * whose overrun bound already keeps the lock from being held for ever.
 */
async function jobStarted(adb: AdbServerAddress, serial: string, action: ActionRow, released: AbortSignal): Promise<boolean> {
  try {
    const r = await shellV2(adb, serial, `[ -e ${jobBase(action)}.run ]`, released);
    return r.exitCode === 0;
  } catch {
    return false;
  }
}

/**
 * Reads the job's completion record. Proof only when it names this action
 * and this request; a job still running, or never started, proves nothing.
 */
export async function readJobRecord(adb: AdbServerAddress, serial: string, action: ActionRow, signal: AbortSignal): Promise<{ exitCode: number; record: string } | undefined> {
  const r = await shellV2(adb, serial, `cat ${jobBase(action)}.done`, signal);
  const line = r.stdout.toString("utf8").trim();
  const rec = parseRecord(line);
  if (r.exitCode !== 0 || !rec || rec.actionId !== action.actionId || rec.sha !== action.requestSha256) return undefined;
  return { exitCode: rec.exitCode, record: line };
}

/** A job's files: marker, started mark, output, errors, an older agent's temporary record, record. */
const JOB_FILE_KINDS = ["job", "run", "out", "err", "tmp", "done"];

/** The files of a job. */
export function jobFiles(action: Pick<ActionRow, "actionId" | "createdAt">): string[] {
  const j = jobBase(action);
  return JOB_FILE_KINDS.map((ext) => `${j}.${ext}`);
}

/**
 * Keeps the phone's job store within JOB_STORE_LIMIT jobs: the oldest are
 * removed, except those of actions still unresolved (their record is the
 * only proof there will ever be).
 */
export async function pruneJobStore(adb: AdbServerAddress, serial: string, keep: ReadonlySet<string>, limit = JOB_STORE_LIMIT): Promise<number> {
  const r = await shellV2(adb, serial, `ls ${JOB_DIR}`, AbortSignal.timeout(10_000));
  if (r.exitCode !== 0) return 0;
  const bases = [...new Set(r.stdout.toString("utf8").split(/\s+/).map((n) => /^(\d+-[0-9a-f-]{36})\./.exec(n)?.[1]).filter((b): b is string => b !== undefined))];
  bases.sort((a, b) => Number(a.split("-", 1)[0]) - Number(b.split("-", 1)[0]));
  const excess = bases.length - limit;
  if (excess <= 0) return 0;
  const drop = bases.filter((b) => !keep.has(b.slice(b.indexOf("-") + 1))).slice(0, excess);
  for (let i = 0; i < drop.length; i += 64) {
    const files = drop.slice(i, i + 64).flatMap((b) => JOB_FILE_KINDS.map((ext) => `${JOB_DIR}/${b}.${ext}`));
    await shellV2(adb, serial, `rm -f ${files.join(" ")}`, AbortSignal.timeout(10_000));
  }
  return drop.length;
}

/**
 * The device jobs of one agent: run, prove, acknowledge, and keep each
 * phone's store bounded. A settled job's files are removed by the next job
 * on that phone (or after a short idle time), not by a round trip of their own.
 */
export class DeviceJobs {
  private acknowledged = 0;
  private readonly toRemove = new Map<string, string[]>();
  private readonly flushTimers = new Map<string, NodeJS.Timeout>();

  constructor(
    readonly adb: AdbServerAddress,
    /** Ids of the device's unresolved actions (their records are never pruned). */
    private readonly unresolved: (physicalId: string) => string[],
    private readonly opts: { pruneEvery?: number; flushAfterMs?: number } = {},
  ) {}

  async run(serial: string, command: string, action: ActionRow, signal: AbortSignal, progress: DispatchProgress): Promise<JobResult> {
    const removing = this.take(serial);
    try {
      return await runDeviceJob(this.adb, serial, command, action, signal, progress, removing);
    } catch (err) {
      // Not past the rm line for sure: keep them for the next time (removing twice is harmless).
      if (removing.length > 0) this.queue(serial, removing);
      throw err;
    }
  }

  async prove(serial: string, action: ActionRow, signal: AbortSignal): Promise<Record<string, unknown> | undefined> {
    const found = await readJobRecord(this.adb, serial, action, signal);
    return found ? { exitCode: found.exitCode, provenBy: `device job record ${jobBase(action)}.done`, record: found.record } : undefined;
  }

  async acknowledge(serial: string, action: ActionRow): Promise<void> {
    this.queue(serial, jobFiles(action));
    if (++this.acknowledged % (this.opts.pruneEvery ?? 32) === 0) {
      await this.flush(serial);
      await pruneJobStore(this.adb, serial, new Set(this.unresolved(action.physicalId)));
    }
  }

  /** Removes what is queued for the phone now. */
  async flush(serial: string): Promise<void> {
    const files = this.take(serial);
    if (files.length === 0) return;
    try {
      await shellV2(this.adb, serial, `rm -f ${files.join(" ")}`, AbortSignal.timeout(10_000));
    } catch (err) {
      this.queue(serial, files);
      throw err;
    }
  }

  private queue(serial: string, files: string[]): void {
    const list = this.toRemove.get(serial) ?? [];
    // Bounded: beyond this the store's pruning takes over.
    list.push(...files.slice(0, Math.max(0, 500 - list.length)));
    this.toRemove.set(serial, list);
    if (!this.flushTimers.has(serial)) {
      const timer = setTimeout(() => {
        this.flushTimers.delete(serial);
        this.flush(serial).catch(() => undefined); // the phone may be gone; pruning covers it
      }, this.opts.flushAfterMs ?? 2_000);
      timer.unref();
      this.flushTimers.set(serial, timer);
    }
  }

  private take(serial: string): string[] {
    const files = this.toRemove.get(serial) ?? [];
    this.toRemove.delete(serial);
    clearTimeout(this.flushTimers.get(serial));
    this.flushTimers.delete(serial);
    return files;
  }
}
