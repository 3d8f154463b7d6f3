import { execFile } from "node:child_process";
import { mkdir, open, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { inject } from "vitest";
import { installCommand, installedIn, repoRoot, type InstalledCli } from "./installed-cli.js";

const exec = promisify(execFile);

/**
 * installCli for test files: the CLI is bundled and packed once per test run
 * (the run's dir from run-dir-global-setup.ts) by the first file that asks,
 * and each file installs that one tarball into its own empty prefix, as a
 * lab host would. Packing took about a minute under load and was done by
 * install-cli and cli-exits each; the tarball is the same bytes for both.
 * Nothing here blocks the worker's event loop (its simulated phones answer meanwhile).
 */
export async function installPackedCli(dir: string): Promise<InstalledCli> {
  const tarball = await packedTarball();
  const [cmd, args, opts] = installCommand(dir, tarball);
  await run(cmd, args, opts);
  return installedIn(dir, tarball);
}

let packed: Promise<string> | undefined;

/** The run's CLI tarball: packed here if no other file has started to, else the one that file packs. */
function packedTarball(): Promise<string> {
  return (packed ??= (async () => {
    const dir = join(inject("runDir"), "cli-pack");
    await mkdir(dir, { recursive: true });
    const done = join(dir, "tarball");
    const failed = join(dir, "failed");
    let lock;
    try {
      // O_EXCL: exactly one worker of the run wins and packs.
      lock = await open(join(dir, "lock"), "wx");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      return waitForPack(dir, done, failed);
    }
    try {
      await lock.writeFile(String(process.pid));
      await lock.close();
      const pkg = join(dir, "package");
      await run(process.execPath, [join(repoRoot, "scripts", "bundle-cli.mjs"), "--out", pkg, "--quiet"], { cwd: dir });
      const tarball = (await run(process.execPath, [join(repoRoot, "scripts", "pack-cli.mjs"), "--from", pkg, "--out", dir, "--quiet"], { cwd: dir })).trim();
      // Written whole, then renamed: a waiter never reads half a path.
      await writeFile(`${done}.tmp`, tarball);
      await rename(`${done}.tmp`, done);
      return tarball;
    } catch (err) {
      await writeFile(failed, String(err));
      throw err;
    }
  })());
}

/**
 * Waits for the packing worker's result: the tarball's path, or its error.
 * It is asked for by reading its files (another process); a packer that died
 * without writing either is reported, not waited on for ever.
 */
async function waitForPack(dir: string, done: string, failed: string): Promise<string> {
  for (;;) {
    const tarball = await readFile(done, "utf8").catch(() => undefined);
    if (tarball !== undefined) return tarball;
    const error = await readFile(failed, "utf8").catch(() => undefined);
    if (error !== undefined) throw new Error(`packing the CLI failed in another test file: ${error}`);
    const pid = Number(await readFile(join(dir, "lock"), "utf8").catch(() => "0"));
    if (pid > 0 && !alive(pid)) {
      // Its result may have landed between the reads above and this check.
      const late = await readFile(done, "utf8").catch(() => undefined);
      if (late !== undefined) return late;
      throw new Error(`the test process packing the CLI (pid ${pid}) exited without a tarball`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Runs a command to completion without blocking; throws with its output when it fails. */
async function run(cmd: string, args: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<string> {
  try {
    return (await exec(cmd, args, { ...opts, encoding: "utf8", maxBuffer: 16 * 1024 * 1024 })).stdout;
  } catch (err) {
    const e = err as { code?: unknown; stdout?: string; stderr?: string };
    throw new Error(`${cmd} ${args.join(" ")} failed (exit ${String(e.code)}):\n${e.stdout ?? ""}${e.stderr ?? ""}`);
  }
}
