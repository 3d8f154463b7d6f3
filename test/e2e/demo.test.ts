/**
 * `make demo` as a newcomer runs it: twice in a row, each run printing `farm …`
 * commands (not `node …/main.js`) that work against that run's standalone;
 * and the README's quick start, run as written against the demo.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { farm, farmBin } from "../support/farm-process.js";

const demoMain = createRequire(import.meta.url).resolve("../dist/demo/main.js");
// The repo root, from the CLI's location (cli/dist/main.js).
const repoRoot = dirname(dirname(dirname(farmBin)));

/** Runs the demo until it prints its last line, then `whileServing`, then stops it with Ctrl-C; returns what it printed. */
async function runDemo(whileServing?: (home: string) => Promise<void>): Promise<{ lines: string[]; home: string; exit: number | null }> {
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
  try {
    await whileServing?.(home);
  } finally {
    proc.kill("SIGINT");
  }
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

/**
 * The README's quick start as a bash script: every line of its `sh` blocks,
 * as written, except `make …` (the demo already runs; the CLI is this
 * checkout's) and the FARM_HOME line (the demo's home is given). A line that
 * prints `export …` lines gets them pasted, as the README says to.
 */
function quickStartScript(readme: string): string {
  const section = readme.slice(readme.indexOf("## Quick start"), readme.indexOf("\n## ", readme.indexOf("## Quick start") + 1));
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
  const commands = blocks
    .flatMap((b) => b.split("\n"))
    .map((l) => l.replace(/\s+#.*$/, "").trim())
    .filter((l) => l !== "" && !l.startsWith("#") && !l.startsWith("make ") && !l.startsWith("export FARM_HOME="));
  return [
    "set -euo pipefail",
    `farm() { node ${JSON.stringify(farmBin)} "$@"; }`,
    // Runs one line, shows its output, and pastes the export lines it printed.
    "run() { local out; out=$(\"$@\"); printf '%s\\n' \"$out\"; eval \"$(printf '%s\\n' \"$out\" | grep '^export ' || true)\"; }",
    ...commands.map((c) => `run ${c}`),
  ].join("\n");
}

describe("the README's quick start", () => {
  it("runs as written against make demo", async () => {
    const readme = await readFile(join(repoRoot, "README.md"), "utf8");
    const script = quickStartScript(readme);
    // Every step the README names is in the script.
    for (const step of ["farm devices", "farm lease acquire", "farm evidence capture", "farm session start", "farm session end", "farm lease release"]) expect(script).toContain(step);
    const cwd = await mkdtemp(join(tmpdir(), "farm-quick-start-"));
    try {
      await runDemo(async (home) => {
        const r = spawnSync("bash", ["-c", script], { cwd, encoding: "utf8", env: { ...process.env, FARM_HOME: home, FARM_OUTPUT: "pretty", FARM_COORDINATOR: "", FARM_TOKEN: "", FARM_CONFIG: join(cwd, "none.json") } });
        expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
        expect(r.stdout).toMatch(/^export FARM_LEASE=farml_/m);
        expect(r.stdout).toMatch(/evidence .*: complete/);
        expect(r.stdout).toMatch(/session .*\(first\): passed/);
        expect(r.stdout).toMatch(/^released /m);
      });
      // The capture went where the README said: relative to where the commands ran.
      expect(existsSync(join(cwd, "first-capture", "manifest.json"))).toBe(true);
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  });
});
