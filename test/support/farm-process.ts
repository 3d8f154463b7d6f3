import { join } from "node:path";
import { spawn, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import { createInterface } from "node:readline";
import { killWithThisProcess } from "../devsim/host/kill-with-this-process.js";

/** The built CLI entry point; tests run the real binary. */
export const farmBin = createRequire(import.meta.url).resolve("@farm/cli/main");

export interface FarmProcess {
  proc: ChildProcess;
  pid: number;
  /** The JSON line the service printed when it was ready. */
  ready: Record<string, unknown>;
  stderr(): string;
  /** SIGTERM, then SIGKILL if it has not exited within the grace period. */
  stop(graceMs?: number): Promise<number | null>;
  kill(signal: NodeJS.Signals): void;
  exited: Promise<number | null>;
}

/**
 * Starts a long-running farm command (coordinator, agent, standalone) as its
 * own process and waits for its "ready" JSON line on stdout. The cap only
 * catches a hung start: at load 20 on 2 cores a standalone took over 20 s.
 */
export async function startFarm(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 45_000): Promise<FarmProcess> {
  // The default lock dir (and host journal) lives under XDG_STATE_HOME: keep it inside the test's own home.
  const state = env["FARM_HOME"] ? { XDG_STATE_HOME: join(String(env["FARM_HOME"]), "state") } : {};
  // FARM_PROFILE_DIR: each service writes a V8 CPU profile there when it exits (benchmarks; docs/performance.md).
  const profile = process.env["FARM_PROFILE_DIR"] ? ["--cpu-prof", `--cpu-prof-dir=${process.env["FARM_PROFILE_DIR"]}`] : [];
  const proc = spawn(process.execPath, [...profile, farmBin, ...args, "--output", "json"], {
    env: { ...process.env, FARM_LOG_LEVEL: "debug", ...state, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  proc.stderr?.setEncoding("utf8").on("data", (d: string) => {
    err += d;
    if (err.length > 1_000_000) err = err.slice(-500_000);
  });
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  // A file that loses its handle (a hook that timed out while this started, a test that throws
  // before its stop) would leave the process running after the file's worker ends: killed then.
  const orphanGuard = killWithThisProcess(proc.pid as number);
  void exited.then(() => orphanGuard.release());
  const lines = createInterface({ input: proc.stdout as NodeJS.ReadableStream });
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`farm ${args[0]} not ready within ${timeoutMs} ms\n${err}`)), timeoutMs);
    lines.once("line", (line) => {
      clearTimeout(timer);
      try {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (parsed["ok"] !== true) reject(new Error(`farm ${args[0]} failed: ${line}\n${err}`));
        else resolve(parsed);
      } catch {
        reject(new Error(`farm ${args[0]} printed non-JSON: ${line}\n${err}`));
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`farm ${args[0]} exited with ${code}\n${err}`));
    });
  }).catch(async (e: unknown) => {
    // Not ready (or not a ready line): it is not left running after the caller gives up on it.
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill("SIGKILL");
      await exited;
    }
    throw e;
  });
  return {
    proc,
    pid: proc.pid as number,
    ready,
    stderr: () => err,
    exited,
    kill: (signal) => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
    },
    async stop(graceMs = 5_000) {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill("SIGCONT");
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), graceMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

export interface CliResult {
  code: number | null;
  json: Record<string, unknown>;
  stdout: string;
  stderr: string;
}

type CliMain = typeof import("@farm/cli/main");
let cliMain: Promise<CliMain> | undefined;

/**
 * Runs a one-shot farm command with JSON output, in this process (the
 * built CLI's main with its output captured; its connections closed when it
 * returns), and parses it. For what a command prints and its exit code;
 * farmProcess for what needs the process (docs/testing.md).
 */
export async function farm(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  // FARM_TEST_CLI=process: every call as the real binary (to compare, or to rule the in-process run out).
  if (process.env["FARM_TEST_CLI"] === "process") return farmProcess(args, env);
  const needs = needsProcess(args);
  if (needs) throw new Error(`farm ${args.slice(0, 2).join(" ")} ${needs}: use farmProcess or startFarm (docs/testing.md)`);
  const { main } = await (cliMain ??= import("@farm/cli/main"));
  let stdout = "";
  let stderr = "";
  const code = await main([...args], { ...process.env, FARM_OUTPUT: "json", ...env }, { out: (s) => (stdout += s), err: (s) => (stderr += s) });
  return { code, json: lastJsonLine(stdout), stdout, stderr };
}

/** Why a command cannot run in process (undefined: it can). */
function needsProcess(args: readonly string[]): string | undefined {
  const [first, second] = args;
  if (args.includes("--help") || args.includes("-h")) return undefined;
  if (first === "standalone" || first === "coordinator") return "is a service";
  if (first === "agent" && (second === undefined || second === "run" || second.startsWith("-"))) return "is a service";
  if (first === "adb" && second === "serve") return "is a service";
  if (first === "lease" && second === "run") return "runs a command with the process's stdio";
  return undefined;
}

/**
 * The same, as the real binary in a process of its own: for signals, a
 * TTY, stdin, a command that outlives the call or spawns children with the
 * process's stdio (lease run), and the process's own exit.
 */
export function farmProcess(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return runCli(process.execPath, [farmBin, ...args], { ...process.env, FARM_OUTPUT: "json", ...env });
}

/** The last line of stdout as JSON ({} when it is not: the assertion on json will show stdout). */
function lastJsonLine(stdout: string): Record<string, unknown> {
  try {
    return JSON.parse(stdout.trim().split("\n").pop() ?? "{}") as Record<string, unknown>;
  } catch {
    return {};
  }
}

/** Runs a CLI process to its exit and parses the last line of its stdout as JSON ({} when it is not). */
export function runCli(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const proc = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    proc.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    proc.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    proc.once("error", reject);
    proc.once("exit", (code) => resolve({ code, json: lastJsonLine(stdout), stdout, stderr }));
  });
}

/**
 * Re-evaluates `probe` until it returns a value (not undefined) or the
 * deadline passes. For state that is only observable by asking (a CLI
 * listing), not by an event.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  { timeoutMs = 15_000, intervalMs = 100 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
