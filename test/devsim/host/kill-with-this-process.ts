import { spawn } from "node:child_process";

/**
 * Kills `pid` (SIGKILL) when this process ends, however it ends: a vitest worker is ended by a
 * signal, so no "exit" handler of its own runs. A detached shell reads a pipe from this process; a
 * line on it (release(), once the process is known to have exited) ends the shell quietly, while
 * end of file without one (the kernel closing the pipe as this process dies) kills the pid and
 * removes `removeDir` (the process's temp dir), if given.
 */
export function killWithThisProcess(pid: number, options: { removeDir?: string } = {}): { release(): void } {
  const script = "read -r line || { kill -9 \"$1\" 2>/dev/null; [ -z \"$2\" ] || rm -rf \"$2\"; }";
  const child = spawn("sh", ["-c", script, "farm-kill-with", String(pid), options.removeDir ?? ""], { detached: true, stdio: ["pipe", "ignore", "ignore"] });
  // Neither the shell nor its pipe keeps this process alive.
  child.unref();
  const pipe = child.stdin as (NodeJS.WritableStream & { unref?: () => void }) | null;
  pipe?.unref?.();
  child.stdin?.on("error", () => undefined);
  child.on("error", () => undefined);
  return { release: () => pipe?.end("released\n") };
}
