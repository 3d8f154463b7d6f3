import type { Caller } from "../fs/caller.js";

export const SIGNALS: Record<string, number> = { HUP: 1, INT: 2, QUIT: 3, KILL: 9, USR1: 10, USR2: 12, TERM: 15, CONT: 18, STOP: 19 };

/** `INT`, `SIGINT` or `2` → 2. */
export function parseSignal(text: string): number | undefined {
  if (/^[0-9]+$/.test(text)) return Number(text);
  const name = text.toUpperCase().replace(/^SIG/, "");
  return SIGNALS[name];
}

export interface SimProcess {
  pid: number;
  ppid: number;
  uid: number;
  /** Process name (ps NAME). */
  name: string;
  /** Command line (ps ARGS). */
  args: string;
  /** Start time, ms since the epoch. */
  startTime: number;
  /** Package of an app process. */
  packageName?: string;
  /** Delivers a signal (SIGKILL included: the handler must then die); without a handler, the process dies. */
  onSignal?: (signal: number) => void;
}

/**
 * The processes `ps` shows: system daemons from boot, app processes, and
 * long-running shell commands such as screenrecord that register here so
 * they can be found and signalled.
 */
export class ProcessTable {
  private readonly processes = new Map<number, SimProcess>();
  private nextPid = 1;
  /** Called when a process is gone (killed or exited). */
  onExit: (process: SimProcess) => void = () => {};

  list(): SimProcess[] {
    return [...this.processes.values()].sort((a, b) => a.pid - b.pid);
  }

  get(pid: number): SimProcess | undefined {
    return this.processes.get(pid);
  }

  find(predicate: (process: SimProcess) => boolean): SimProcess | undefined {
    return this.list().find(predicate);
  }

  spawn(fields: Omit<SimProcess, "pid" | "startTime"> & { startTime?: number }): SimProcess {
    // Pids grow and skip, like a kernel's after boot.
    const pid = this.nextPid;
    this.nextPid += this.nextPid < 100 ? 1 : 1 + Math.floor(Math.random() * 20);
    const process: SimProcess = { ...fields, pid, startTime: fields.startTime ?? Date.now() };
    this.processes.set(pid, process);
    return process;
  }

  /** Removes a process; with `only`, just if pid still names that process (pids restart after a reboot). */
  exit(pid: number, only?: SimProcess): void {
    const process = this.processes.get(pid);
    if (!process || (only && process !== only)) return;
    this.processes.delete(pid);
    this.onExit(process);
  }

  /** kill(2): ESRCH / EPERM as text, or undefined on success. */
  kill(pid: number, signal: number, caller: Caller): "No such process" | "Operation not permitted" | undefined {
    const process = this.processes.get(pid);
    if (!process) return "No such process";
    if (caller.uid !== 0 && caller.uid !== process.uid) return "Operation not permitted";
    if (signal === 0) return undefined;
    if (process.onSignal) process.onSignal(signal);
    else if (signal !== 18 && signal !== 19) this.exit(pid);
    return undefined;
  }

  clear(): void {
    this.processes.clear();
    this.nextPid = 1;
  }
}
