import { execFile, execFileSync, spawn } from "node:child_process";
import { chmod, chown, mkdtemp, readdir, rm } from "node:fs/promises";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A private PostgreSQL server for tests and benchmarks: its own data dir, port and socket dir. */
export interface PgCluster {
  /** Superuser URL of the `postgres` database, over TCP on loopback. */
  url: string;
  port: number;
  dir: string;
  stop(): Promise<void>;
}

export interface PgClusterOptions {
  /** Test speed over durability (fsync off); benchmarks keep the defaults. */
  fast?: boolean;
  maxConnections?: number;
  /** Server libraries to load at start (benchmarks: "pg_stat_statements", to count statements). */
  preload?: string[];
}

/** PostgreSQL's server binaries: $FARM_PG_BIN, else Debian's newest /usr/lib/postgresql/<v>/bin. */
export async function pgBinDir(): Promise<string> {
  if (process.env.FARM_PG_BIN) return process.env.FARM_PG_BIN;
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? (await readdir(root)).filter((v) => existsSync(join(root, v, "bin", "initdb"))) : [];
  if (versions.length === 0) throw new Error("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run scripts/install-system-deps.sh, or set FARM_PG_BIN");
  versions.sort((a, b) => Number(b) - Number(a));
  return join(root, versions[0]!, "bin");
}

/**
 * Starts a throwaway cluster. PostgreSQL refuses to run as root, so as
 * root the server runs as Debian's `postgres` user (or `nobody`), owning
 * only the temp dir.
 */
export async function startPgCluster(opts: PgClusterOptions = {}): Promise<PgCluster> {
  const bin = await pgBinDir();
  const dir = await mkdtemp(join(tmpdir(), "farm-pg-"));
  const data = join(dir, "data");
  const asUser = process.getuid?.() === 0 ? serverUser() : undefined;
  if (asUser) {
    await chown(dir, asUser.uid, asUser.gid);
    await chmod(dir, 0o700);
  }
  const exec = (cmd: string, args: string[]) => asUser ? run("runuser", ["-u", asUser.name, "--", join(bin, cmd), ...args]) : run(join(bin, cmd), args);
  try {
    await exec("initdb", ["-D", data, "-A", "trust", "-U", "farm", "-E", "UTF8", "--locale=C", "--no-sync"]);
    const settings = [
      "-c listen_addresses=127.0.0.1",
      `-k ${dir}`,
      `-c max_connections=${opts.maxConnections ?? 200}`,
      ...(opts.fast ? ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"] : []),
      ...(opts.preload?.length ? [`-c shared_preload_libraries=${opts.preload.join(",")}`] : []),
    ];
    // A port freed a moment ago can be taken again in between: try a few.
    for (let attempt = 0;; attempt++) {
      const port = await freePort();
      try {
        await exec("pg_ctl", ["-D", data, "-w", "-t", "30", "-l", join(dir, "server.log"), "-o", [`-p ${port}`, ...settings].join(" "), "start"]);
      } catch (err) {
        if (attempt < 3) continue;
        throw err;
      }
      const watchdog = startWatchdog(dir, asUser ? ["runuser", "-u", asUser.name, "--", join(bin, "pg_ctl")] : [join(bin, "pg_ctl")], data);
      let stopped = false;
      return {
        url: `postgres://farm@127.0.0.1:${port}/postgres`,
        port,
        dir,
        async stop() {
          if (stopped) return;
          stopped = true;
          await exec("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]).catch(() => undefined);
          await rm(dir, { recursive: true, force: true });
          watchdog.end();
        },
      };
    }
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * A run killed by a signal (CI's timeout, Ctrl-C, the OOM killer) never calls stop(), and the
 * postmaster would outlive it. So a detached shell (its own session: a signal to the run's process
 * group does not reach it) reads a pipe from this process until it closes, which the kernel does
 * however this process ends, then stops the cluster and removes its dir. stop() closes the pipe
 * itself; the watchdog then finds nothing left to do. Returns what closes the pipe.
 */
function startWatchdog(dir: string, pgCtl: string[], data: string): { end(): void } {
  const child = spawn("sh", ["-c", "cat >/dev/null; \"$@\" -D \"$FARM_PG_DATA\" -m immediate -w stop >/dev/null 2>&1; rm -rf \"$FARM_PG_DIR\"", "farm-pg-watchdog", ...pgCtl], {
    detached: true,
    stdio: ["pipe", "ignore", "ignore"],
    env: { ...process.env, FARM_PG_DATA: data, FARM_PG_DIR: dir },
  });
  // Neither the child nor its pipe keeps this process alive.
  child.unref();
  const pipe = child.stdin as (NodeJS.WritableStream & { unref?: () => void; end(): void }) | null;
  pipe?.unref?.();
  // The watchdog gone early (sh missing) is no reason to fail a run.
  child.stdin?.on("error", () => undefined);
  child.on("error", () => undefined);
  return { end: () => pipe?.end() };
}

function serverUser(): { name: string; uid: number; gid: number } {
  for (const name of ["postgres", "nobody"]) {
    try {
      const uid = Number(execFileSync("id", ["-u", name], { encoding: "utf8" }).trim());
      const gid = Number(execFileSync("id", ["-g", name], { encoding: "utf8" }).trim());
      return { name, uid, gid };
    } catch {
      // not on this machine: try the next
    }
  }
  throw new Error("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as");
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
