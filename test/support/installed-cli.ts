import { spawn, spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { farmBin, runCli, type CliResult } from "./farm-process.js";

/** The repository root, found from the built CLI (cli/dist/main.js). */
export const repoRoot = dirname(dirname(dirname(farmBin)));

export interface InstalledCli {
  prefix: string;
  /** PREFIX/bin/farm */
  bin: string;
  /** process.env with PREFIX/bin first on PATH, so `farm` is the installed one. */
  env: NodeJS.ProcessEnv;
}

/**
 * What `make install PREFIX=...` does, into `dir`: bundles the built code
 * (scripts/bundle-cli.mjs, into dir/package rather than cli/bundle, so a
 * test never races the working tree) and installs it under dir/prefix
 * (scripts/install-cli.mjs). Needs `npx tsc -b` and the dashboard built.
 */
export function installCli(dir: string): InstalledCli {
  const pkg = join(dir, "package");
  const prefix = join(dir, "prefix");
  for (
    const [script, args] of [
      ["bundle-cli.mjs", ["--out", pkg]],
      ["install-cli.mjs", ["--from", pkg, "--prefix", prefix]],
    ] as const
  ) {
    const r = spawnSync(process.execPath, [join(repoRoot, "scripts", script), ...args, "--quiet"], { encoding: "utf8", cwd: dir });
    if (r.status !== 0) throw new Error(`scripts/${script} failed (exit ${r.status}):\n${r.stdout}${r.stderr}`);
  }
  const binDir = join(prefix, "bin");
  return { prefix, bin: join(binDir, "farm"), env: { ...process.env, PATH: `${binDir}:${process.env["PATH"] ?? ""}` } };
}

/** What a run of the installed farm gave. */
export type RunResult = CliResult;

/** Runs `farm ARGS` found on PATH (the caller's env decides which farm). */
export function runFarm(args: string[], env: NodeJS.ProcessEnv): Promise<RunResult> {
  return runCli("farm", args, env);
}

export interface Service {
  ready: Record<string, unknown>;
  stop(): Promise<void>;
}

/** Starts a long-running `farm` command from PATH and waits for its ready line. */
export async function startInstalledFarm(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 20_000): Promise<Service> {
  const proc = spawn("farm", [...args, "--output", "json"], { env, stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  proc.stderr.setEncoding("utf8").on("data", (d: string) => {
    err = (err + d).slice(-100_000);
  });
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill("SIGTERM");
    const timer = setTimeout(() => proc.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(timer);
  };
  const lines = createInterface({ input: proc.stdout });
  try {
    const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`farm ${args[0]} not ready within ${timeoutMs} ms\n${err}`)), timeoutMs);
      lines.once("line", (line) => {
        clearTimeout(timer);
        try {
          const parsed = JSON.parse(line) as Record<string, unknown>;
          if (parsed["ok"] === true) resolve(parsed);
          else reject(new Error(`farm ${args[0]} failed: ${line}\n${err}`));
        } catch {
          reject(new Error(`farm ${args[0]} printed non-JSON: ${line}\n${err}`));
        }
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`farm ${args[0]} exited with ${proc.exitCode}\n${err}`));
      });
    });
    return { ready, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
