import { spawn } from "node:child_process";
import { performance } from "node:perf_hooks";

export interface BoundedRun {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Killed at the hard deadline. */
  timedOut: boolean;
  /** Killed because stdout + stderr passed the output cap. */
  overflowed: boolean;
  /** The executable could not be started (ENOENT, EACCES). */
  spawnError: string | null;
  durationMs: number;
}

/**
 * Runs a helper tool with a hard deadline and a cap on its combined output:
 * passing either kills it (SIGKILL) and says so. Output is kept as text for
 * diagnostics; nothing larger than the cap is ever buffered.
 */
export function runBounded(command: string, args: string[], opts: { deadlineMs: number; maxOutputBytes: number }): Promise<BoundedRun> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let bytes = 0;
    let timedOut = false;
    let overflowed = false;
    let spawnError: string | null = null;
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
    const kill = () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, opts.deadlineMs);
    const take = (into: Buffer[]) => (chunk: Buffer) => {
      if (overflowed) return;
      bytes += chunk.length;
      if (bytes > opts.maxOutputBytes) {
        overflowed = true;
        kill();
        return;
      }
      into.push(chunk);
    };
    child.stdout.on("data", take(out));
    child.stderr.on("data", take(err));
    child.once("error", (e) => {
      spawnError = e.message;
    });
    child.once("close", (exitCode, signal) => {
      clearTimeout(timer);
      resolve({
        exitCode,
        signal,
        stdout: Buffer.concat(out).toString("utf8"),
        stderr: Buffer.concat(err).toString("utf8"),
        timedOut,
        overflowed,
        spawnError,
        durationMs: performance.now() - t0,
      });
    });
  });
}
