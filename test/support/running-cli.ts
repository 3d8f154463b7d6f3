import { spawn, type ChildProcess } from "node:child_process";
import { onTestFinished } from "vitest";
import { farmBin } from "./farm-process.js";

/** A CLI process the test keeps hold of while it runs: to signal it, read it midway, or wait for its exit. */
export interface RunningCli {
  proc: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: string | null }>;
}

/** The real CLI as a process of its own, JSON output; killed at the test's end if nothing else ended it. */
export function startCli(args: string[], env: NodeJS.ProcessEnv): RunningCli {
  const proc = spawn(process.execPath, [farmBin, ...args], { env: { ...process.env, ...env, FARM_OUTPUT: "json" }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  proc.stdout?.setEncoding("utf8").on("data", (d: string) => (out += d));
  proc.stderr?.setEncoding("utf8").on("data", (d: string) => (err += d));
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => proc.once("exit", (code, signal) => resolve({ code, signal })));
  onTestFinished(() => void (proc.exitCode === null && proc.signalCode === null && proc.kill("SIGKILL")));
  return { proc, stdout: () => out, stderr: () => err, exited };
}
