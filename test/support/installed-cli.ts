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
  /** PREFIX/lib/node_modules/@farm/cli: the installed package. */
  home: string;
  /** The tarball it was installed from (farm-cli-VERSION.tgz). */
  tarball: string;
  /** process.env with PREFIX/bin first on PATH, so `farm` is the installed one. */
  env: NodeJS.ProcessEnv;
}

/** Runs a command to completion; throws with its output when it fails. */
function run(cmd: string, args: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv }): string {
  const r = spawnSync(cmd, args, { encoding: "utf8", ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (exit ${r.status}):\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

/**
 * What `make pack` and then `npm install -g` on a lab host do, into `dir`:
 * packCli, then installTarball. Needs `npx tsc -b` and the dashboard built.
 * About half a minute on a quiet machine, two on a loaded one. Under vitest,
 * installPackedCli (test/support/packed-cli.ts) packs once per run instead.
 */
export function installCli(dir: string): InstalledCli {
  return installTarball(dir, packCli(dir));
}

/**
 * Bundles the built code (scripts/bundle-cli.mjs, into dir/package rather
 * than cli/bundle, so a test never races the working tree) and packs it
 * (scripts/pack-cli.mjs, dir/farm-cli-VERSION.tgz): the tarball's path.
 * Most of the time goes to npm gzipping ~40 MB.
 */
export function packCli(dir: string): string {
  const pkg = join(dir, "package");
  run(process.execPath, [join(repoRoot, "scripts", "bundle-cli.mjs"), "--out", pkg, "--quiet"], { cwd: dir });
  return run(process.execPath, [join(repoRoot, "scripts", "pack-cli.mjs"), "--from", pkg, "--out", dir, "--quiet"], { cwd: dir }).trim();
}

/**
 * Installs `tarball` into the empty prefix dir/prefix with `npm install -g
 * --offline` and an empty npm cache of its own: the install can take
 * nothing from the network, the machine's npm cache or this checkout.
 */
export function installTarball(dir: string, tarball: string): InstalledCli {
  const [cmd, args, opts] = installCommand(dir, tarball);
  run(cmd, args, opts);
  return installedIn(dir, tarball);
}

/** The npm command installTarball runs (packed-cli.ts runs the same without blocking). */
export function installCommand(dir: string, tarball: string): [string, string[], { cwd: string; env: NodeJS.ProcessEnv }] {
  const npmEnv = { ...process.env, npm_config_cache: join(dir, "npm-cache"), npm_config_userconfig: join(dir, "npmrc"), npm_config_update_notifier: "false" };
  return ["npm", ["install", "-g", "--offline", "--no-audit", "--no-fund", "--prefix", join(dir, "prefix"), tarball], { cwd: dir, env: npmEnv }];
}

/** Where installTarball put it. */
export function installedIn(dir: string, tarball: string): InstalledCli {
  const prefix = join(dir, "prefix");
  const binDir = join(prefix, "bin");
  return {
    prefix,
    bin: join(binDir, "farm"),
    home: join(prefix, "lib", "node_modules", "@farm", "cli"),
    tarball,
    env: { ...process.env, PATH: `${binDir}:${process.env["PATH"] ?? ""}` },
  };
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
