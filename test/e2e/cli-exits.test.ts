/**
 * How the farm CLI ends, as a process: a reader that closes stdout early
 * (`farm --help | head`), a terminal reporting zero columns, SIGTERM during
 * a lease wait, and the exit codes of farm's own refusals.
 */
import { spawn } from "node:child_process";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { spawn as ptySpawn } from "node-pty";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { farm, farmBin, farmProcess, waitFor } from "../support/farm-process.js";
import { type InstalledCli } from "../support/installed-cli.js";
import { installPackedCli } from "../support/packed-cli.js";
import { startLab, type Lab } from "../support/lab.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

let dir: TempDir;
let installed: InstalledCli;
let lab: Lab;
let serial: string;

beforeAll(async () => {
  dir = await makeTempDir("cli-exits");
  // Not side by side with the lab: packing beside a starting standalone outlasted its 20 s ready wait under load.
  installed = await installPackedCli(dir.path);
  lab = await startLab("cli-exits");
  serial = (await lab.addDevice({ serialno: "EXIT0001" })).serial;
}, 300_000);

afterAll(async () => {
  await lab?.stop();
  await dir?.remove();
});

/**
 * Runs farm on a pseudo-terminal that reports its size as it is set with
 * `stty` first (node-pty itself turns 0 columns into 80). Drawing more than
 * `limit` bytes is taken as spinning: the terminal is killed and the run
 * reported as such.
 */
function onTerminal(
  args: string[],
  env: NodeJS.ProcessEnv,
  size: { cols: number; rows: number },
  whileRunning?: (screen: () => string, pid: number) => Promise<void>,
): Promise<{ screen: string; code: number; signal: number; spun: boolean }> {
  // CI is dropped: progress is never shown in CI, and this is about a terminal.
  const { CI: _ci, ...base } = process.env;
  const cmd = `stty cols ${size.cols} rows ${size.rows} && exec "$0" "$@"`;
  const term = ptySpawn("/bin/sh", ["-c", cmd, process.execPath, farmBin, ...args], {
    cols: 80,
    rows: 24,
    env: { ...base, ...env, TERM: "xterm" } as Record<string, string>,
  });
  let screen = "";
  let spun = false;
  const limit = 1_000_000;
  term.onData((d) => {
    screen += d;
    if (!spun && screen.length > limit) {
      spun = true;
      term.kill("SIGKILL");
    }
  });
  const exit = new Promise<{ exitCode: number; signal?: number }>((resolve) => term.onExit(resolve));
  return (async () => {
    if (whileRunning) await whileRunning(() => screen, term.pid);
    const { exitCode, signal } = await exit;
    return { screen: screen.slice(0, 2000), code: exitCode, signal: signal ?? 0, spun };
  })();
}

/** Runs a command whose stdout reader is gone before it writes a byte; its exit code and stderr. */
function withClosedStdout(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; signal: string | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    // Our end of the pipe closes at once: the CLI's first write meets a pipe without a reader.
    proc.stdout.destroy();
    let stderr = "";
    proc.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    proc.once("error", reject);
    proc.once("exit", (code, signal) => resolve({ code, signal, stderr }));
  });
}

describe("a closed stdout", () => {
  const env = () => ({ ...installed.env, FARM_HOME: dir.path, FARM_CONFIG: `${dir.path}/none.json` });

  it.each([
    ["--help"],
    ["help", "lease"],
    ["completion", "bash"],
    ["--version"],
  ])("farm %s ends quietly with 141, as a writer whose reader went away", async (...args) => {
    const r = await withClosedStdout(installed.bin, args, env());
    expect(r.stderr).toBe("");
    expect(r.code).toBe(141);
  });

  it("the same from the built main.js", async () => {
    const r = await withClosedStdout(process.execPath, [farmBin, "--help"], env());
    expect(r.stderr).toBe("");
    expect(r.code).toBe(141);
  });
});

describe("a terminal that reports zero columns", () => {
  it("farm screenshot writes its PNG and draws no progress", async () => {
    const lease = await farm(["lease", "acquire", "--device", serial, "--ttl", "1m"], lab.env);
    const token = (lease.json["lease"] as { token: string }).token;
    try {
      const shot = join(lab.dir.path, "zero-cols.png");
      const r = await onTerminal(["screenshot", shot, "-o", "pretty"], { ...lab.env, FARM_LEASE: token, FARM_DEVICE: serial }, { cols: 0, rows: 0 });
      expect(r.spun).toBe(false);
      expect(r.code).toBe(0);
      expect((await stat(shot)).size).toBeGreaterThan(0);
    } finally {
      await farm(["lease", "release", "--lease", token], lab.env);
    }
  }, 120_000);
});

describe("SIGTERM", () => {
  it("ends a lease wait at once, leaving nothing held or queued", async () => {
    const held = await farm(["lease", "acquire", "--device", serial, "--ttl", "2m"], lab.env);
    const token = (held.json["lease"] as { token: string }).token;
    try {
      const waiter = spawn(process.execPath, [farmBin, "lease", "acquire", "--device", serial, "--wait", "10m", "--ttl", "2m"], {
        env: { ...process.env, ...lab.env, FARM_OUTPUT: "json" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      waiter.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
      const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => waiter.once("exit", (code, signal) => resolve({ code, signal })));
      // A waiter that ignored the signal is not left behind.
      onTestFinished(() => void (waiter.exitCode === null && waiter.signalCode === null && waiter.kill("SIGKILL")));
      const queued = async () => ((await farm(["lease", "list"], lab.env)).json["queue"] as unknown[] | undefined) ?? [];
      await waitFor("the waiter in the queue", async () => ((await queued()).length === 1 ? true : undefined), { timeoutMs: 30_000 });
      waiter.kill("SIGTERM");
      // Exits on its own (the test's timeout is the bound): a signal, not the wait's 10 minutes.
      const end = await exited;
      expect(end.signal).toBeNull();
      expect(end.code).toBe(143);
      expect(stdout).toMatch(/"ok":false/);
      // Nothing queued; the phone still held by the first lease only.
      const list = await farm(["lease", "list"], lab.env);
      expect(list.json["queue"]).toEqual([]);
      expect((list.json["leases"] as { serial: string }[]).filter((l) => l.serial === serial)).toHaveLength(1);
    } finally {
      await farm(["lease", "release", "--lease", token], lab.env);
    }
    // The phone is free: nothing granted to the waiter lingers.
    const after = await farm(["lease", "acquire", "--device", serial, "--wait", "0s"], lab.env);
    expect(after.json).toMatchObject({ ok: true });
    await farm(["lease", "release", "--lease", (after.json["lease"] as { token: string }).token], lab.env);
  }, 120_000);
});

describe("exit codes", () => {
  it("a refusal exits with its code's exit code: 69 no device available, 77 no token, 64 a bad flag", async () => {
    const held = await farm(["lease", "acquire", "--device", serial, "--ttl", "1m"], lab.env);
    const token = (held.json["lease"] as { token: string }).token;
    try {
      const none = await farmProcess(["lease", "acquire", "--device", serial, "--wait", "0s"], lab.env);
      expect(none.json).toMatchObject({ ok: false, code: "NO_DEVICE_AVAILABLE" });
      expect(none.code).toBe(69);
    } finally {
      await farm(["lease", "release", "--lease", token], lab.env);
    }
    const noToken = await farmProcess(["devices"], { ...lab.env, FARM_HOME: join(dir.path, "empty-home"), FARM_COORDINATOR: "http://127.0.0.1:1" });
    expect(noToken.json).toMatchObject({ ok: false, code: "UNAUTHENTICATED", field: "token" });
    expect(noToken.code).toBe(77);
    const usage = await farmProcess(["devices", "--bogus"], lab.env);
    expect(usage.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT" });
    expect(usage.code).toBe(64);
  });

  it("the issue's own: a busy matching phone waited out is LEASE_WAIT_TIMEOUT, 75, after the wait; an unreachable coordinator is COORDINATOR_UNAVAILABLE, 69", async () => {
    const held = await farm(["lease", "acquire", "--device", serial, "--ttl", "1m"], lab.env);
    const token = (held.json["lease"] as { token: string }).token;
    try {
      // The phone matches but is busy: farm waits the whole --wait (it may come free), then says so with 75, try again later.
      const started = performance.now();
      const busy = await farmProcess(["lease", "acquire", "--device", serial, "--wait", "2s"], lab.env);
      expect(busy.json).toMatchObject({ ok: false, code: "LEASE_WAIT_TIMEOUT" });
      expect(busy.code).toBe(75);
      expect(performance.now() - started).toBeGreaterThanOrEqual(2_000);
    } finally {
      await farm(["lease", "release", "--lease", token], lab.env);
    }
    // Port 1 on loopback: nothing listens, the connection is refused.
    const down = await farmProcess(["devices"], { ...lab.env, FARM_COORDINATOR: "http://127.0.0.1:1" });
    expect(down.json).toMatchObject({ ok: false, code: "COORDINATOR_UNAVAILABLE", field: "coordinator" });
    expect(down.code).toBe(69);
  }, 60_000);

  it("farm lease run passes the child's own code through, farm's codes included", async () => {
    for (const childCode of [0, 1, 3, 69]) {
      const r = await farmProcess(["lease", "run", "--device", serial, "--", "sh", "-c", `exit ${childCode}`], lab.env);
      expect(r.code).toBe(childCode);
    }
  });
});
