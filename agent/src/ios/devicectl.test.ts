/**
 * Where devicectl's runs keep their files: an agent killed during a run
 * (tests SIGKILL agents) leaves that run's dir in the agent's own workDir,
 * which its next start empties, and nothing in the host's temp dir.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { parseDevicectl, resetDevicectlDir } from "./devicectl.js";

// The built module, run by a child process this test kills (the e2e tier's agents are the built code too).
const built = fileURLToPath(new URL("../../dist/ios/devicectl.js", import.meta.url));
let dir: string | undefined;
const pids: number[] = [];

afterEach(async () => {
  for (const pid of pids.splice(0)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

/** Resolves once `file` exists (written by the stand-in tool when it starts), polled: the tool is another process. */
async function appears(file: string): Promise<void> {
  while (!existsSync(file)) await new Promise((r) => setTimeout(r, 20));
}

describe("devicectl's run dirs", () => {
  it("are in the agent's workDir, not the host's temp dir, and a killed run's is removed by the next reset", async () => {
    dir = await mkdtemp(join(tmpdir(), "farm-devicectl-test-"));
    const hostTmp = join(dir, "tmp");
    const workDir = join(dir, "agent", "devicectl");
    await mkdir(hostTmp);
    // A devicectl that notes its pid and never answers: the run is under way when the agent dies.
    const tool = join(dir, "devicectl.sh");
    const started = join(dir, "tool.pid");
    await writeFile(tool, `#!/bin/sh\necho $$ > ${started}.tmp && mv ${started}.tmp ${started}\nexec sleep 600\n`);
    await chmod(tool, 0o755);
    const script = `const m = await import(${JSON.stringify(built)}); const t = m.parseDevicectl(process.argv[1], process.argv[2]); if (m.resetDevicectlDir) await m.resetDevicectlDir(t); await m.listDevices(t, 600000);`;
    const agent = spawn(process.execPath, ["--input-type=module", "-e", script, tool, workDir], { env: { ...process.env, TMPDIR: hostTmp }, stdio: "ignore" });
    pids.push(agent.pid!);
    const exited = new Promise((resolve) => agent.once("exit", resolve));
    await appears(started);
    pids.push(Number((await readFile(started, "utf8")).trim()));
    agent.kill("SIGKILL");
    await exited;

    expect(await readdir(hostTmp)).toEqual([]);
    expect((await readdir(workDir)).filter((n) => n.startsWith("run-"))).toHaveLength(1);
    await resetDevicectlDir(parseDevicectl("devicectl", workDir));
    expect(await readdir(workDir)).toEqual([]);
    expect((await stat(workDir)).mode & 0o777).toBe(0o700);
  });
});
