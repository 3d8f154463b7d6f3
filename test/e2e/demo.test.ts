/**
 * `make demo` as a newcomer runs it: twice in a row, each run printing `farm …`
 * commands (not `node …/main.js`) that work against that run's standalone.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { farm } from "../support/farm-process.js";

const demoMain = createRequire(import.meta.url).resolve("../dist/demo/main.js");

/** Runs the demo until it prints its last line, returns what it printed, then stops it with Ctrl-C. */
async function runDemo(): Promise<{ lines: string[]; home: string; exit: number | null }> {
  const proc = spawn(process.execPath, [demoMain], { stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  let err = "";
  proc.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
  const lines: string[] = [];
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: proc.stdout }).on("line", (line) => {
      lines.push(line);
      if (line.startsWith("Ctrl-C stops everything")) resolve();
    });
    void exited.then((code) => reject(new Error(`demo exited with ${code} before it was ready\n${lines.join("\n")}\n${err}`)));
  });
  const home = lines.find((l) => l.trim().startsWith("export FARM_HOME="))?.trim().slice("export FARM_HOME=".length) ?? "";
  // The printed commands work while the demo serves.
  const devices = await farm(["devices"], { FARM_HOME: home, FARM_COORDINATOR: "", FARM_TOKEN: "" });
  expect(devices.code).toBe(0);
  expect(devices.json["devices"]).toHaveLength(2);
  proc.kill("SIGINT");
  return { lines, home, exit: await exited };
}

describe("make demo", () => {
  it("runs twice in a row, each time in its own home, printing farm commands", async () => {
    const first = await runDemo();
    const second = await runDemo();
    for (const run of [first, second]) {
      expect(run.exit).toBe(0);
      const from = run.lines.indexOf("Try, in another shell:") + 1;
      const tries = run.lines.slice(from, run.lines.indexOf("", from));
      const commands = tries.map((l) => l.trim()).filter((l) => !l.startsWith("export ") && !l.startsWith("alias ") && !l.startsWith("curl "));
      expect(commands.length).toBeGreaterThanOrEqual(4);
      for (const c of commands) expect(c).toMatch(/^farm /);
      expect(run.lines.join("\n")).not.toMatch(/node \S*main\.js (devices|agents|token|evidence)/);
      // Ctrl-C removed the run's home.
      expect(existsSync(run.home)).toBe(false);
    }
    expect(first.home).not.toBe(second.home);
  });
});
