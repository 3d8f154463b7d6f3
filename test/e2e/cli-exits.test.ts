/**
 * How the farm CLI ends, as a process: a reader that closes stdout early
 * (`farm --help | head`), a terminal reporting zero columns, SIGTERM during
 * a lease wait, and the exit codes of farm's own refusals.
 */
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farmBin } from "../support/farm-process.js";
import { installCli, type InstalledCli } from "../support/installed-cli.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

let dir: TempDir;
let installed: InstalledCli;

beforeAll(async () => {
  dir = await makeTempDir("cli-exits");
  installed = installCli(dir.path);
}, 120_000);

afterAll(async () => {
  await dir?.remove();
});

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
