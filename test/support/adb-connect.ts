import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { farmBin } from "./farm-process.js";

/** A `farm adb connect --foreground` process: its JSON answer, every stdout line, and its exit. */
export interface ForegroundTunnel {
  proc: ChildProcess;
  answer: Record<string, unknown>;
  lines: string[];
  /** Its stderr so far: the tunnel's log lines (refused streams, why it closed). */
  stderr: () => string;
  exited: Promise<number | null>;
}

/**
 * Starts `farm adb connect --foreground` and resolves with its first line
 * (the JSON answer); rejects if it exits before answering. The caller
 * stops the process (kill) if the test ends before it does.
 */
export async function connectForeground(env: NodeJS.ProcessEnv): Promise<ForegroundTunnel> {
  const proc = spawn(process.execPath, [farmBin, "adb", "connect", "--foreground", "-o", "json"], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  const lines: string[] = [];
  let stderr = "";
  proc.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const rl = createInterface({ input: proc.stdout! });
  const first = await new Promise<string>((resolve, reject) => {
    rl.on("line", (line) => {
      lines.push(line);
      if (lines.length === 1) resolve(line);
    });
    void exited.then((code) => reject(new Error(`farm adb connect exited ${code} before answering: ${stderr}`)));
  });
  return { proc, answer: JSON.parse(first) as Record<string, unknown>, lines, stderr: () => stderr, exited };
}
