import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Per-call stage marks for the routing benchmark (docs/performance.md),
 * off unless FARM_STAGE_TRACE names a directory. When on, each process
 * keeps (id, stage, time) in memory and writes them to
 * `<dir>/stage-<pid>.jsonl` as it exits. Times are the system's monotonic
 * clock (CLOCK_MONOTONIC through process.hrtime), in milliseconds, so the
 * marks of the client, the coordinator and the agent line up across
 * processes of one machine. Off, `stageTrace` is undefined and a mark is
 * one optional call that does nothing. Each mark also carries the CPU the
 * process has used so far (user + system, all its threads), so a stage
 * whose marks are made by one process shows how much of its time was work
 * and how much waiting: the figure a loaded machine does not inflate as
 * much as wall time.
 */
export interface StageTrace {
  /** Records that call `id` reached `stage` now. */
  mark(id: string, stage: string): void;
  /** Records that `id` (an agent command id) belongs to the call `to` (the client's trace id). */
  link(id: string, to: string): void;
}

/** The request header a client sets to name its call in the marks. */
export const TRACE_HEADER = "x-farm-trace-id";

/** Marks kept per process at most: a trace is for a benchmark run, not for a service left on. */
const MAX_MARKS = 1_000_000;

/** One line of a trace file. */
export interface StageMark {
  id: string;
  stage: string;
  /** Monotonic milliseconds; absent on a link. */
  t?: number;
  /** The process's CPU so far (user + system), in milliseconds; absent on a link. */
  cpu?: number;
  /** On a link: the trace id this id belongs to. */
  to?: string;
}

function startTrace(dir: string): StageTrace {
  const marks: StageMark[] = [];
  process.once("exit", () => {
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      writeFileSync(join(dir, `stage-${process.pid}.jsonl`), marks.map((m) => JSON.stringify(m)).join("\n") + "\n", { mode: 0o600 });
    } catch {
      // A benchmark aid: a process that cannot write its marks still exits normally.
    }
  });
  return {
    mark(id, stage) {
      if (marks.length >= MAX_MARKS) return;
      const u = process.cpuUsage();
      marks.push({ id, stage, t: Number(process.hrtime.bigint()) / 1e6, cpu: (u.user + u.system) / 1000 });
    },
    link(id, to) {
      if (marks.length < MAX_MARKS) marks.push({ id, stage: "link", to });
    },
  };
}

const dir = process.env["FARM_STAGE_TRACE"];

/** The trace of this process, or undefined when FARM_STAGE_TRACE is unset (the default). */
export const stageTrace: StageTrace | undefined = dir ? startTrace(dir) : undefined;

/** Monotonic milliseconds on the clock the marks use. */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
