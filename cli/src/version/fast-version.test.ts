import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../main.js";
import { answerLocalVersion } from "./fast-version.js";

/**
 * The installed entry (entry.ts) answers `farm --version` itself when it
 * can: what it prints must be what the CLI prints, and everything it cannot
 * answer (a coordinator to ask, a refusal, another command) it leaves to the
 * CLI, having printed nothing.
 */
let dir: string;
let env: NodeJS.ProcessEnv;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "farm-fast-version-"));
  env = { FARM_HOME: join(dir, "home"), FARM_CONFIG: join(dir, "none.json"), FARM_COORDINATOR: "", FARM_TOKEN: "" };
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function fast(argv: string[], e: NodeJS.ProcessEnv): { answered: boolean; out: string } {
  let out = "";
  const answered = answerLocalVersion(argv, e, (s) => (out += s));
  return { answered, out };
}

async function full(argv: string[], e: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await main(argv, e, { out: (s) => (out += s), err: (s) => (err += s) });
  return { code, out, err };
}

describe("farm --version before the CLI loads", () => {
  const answered: [string, string[], NodeJS.ProcessEnv][] = [
    ["--version", ["--version"], {}],
    ["-v", ["-v"], {}],
    ["the old spelling", ["version"], {}],
    ["pretty", ["--version", "--output", "pretty"], {}],
    ["wide, flag first", ["-o", "wide", "--version"], {}],
    ["--output=json", ["--output=json", "--version"], {}],
    ["FARM_OUTPUT", ["--version"], { FARM_OUTPUT: "pretty" }],
  ];
  it.each(answered)("%s: answered, as the CLI answers it", async (_name, argv, extra) => {
    const e = { ...env, ...extra };
    const got = fast(argv, e);
    const want = await full(argv, e);
    expect(got.answered).toBe(true);
    expect(want.code).toBe(0);
    expect(got.out).toBe(want.out);
    expect(got.out).toMatch(/^(\{"ok":true,"version":"[^"]+"\}|farm \S+)\n$/);
  });

  it("a config file's output format and no coordinator in it: answered alike", async () => {
    const config = join(dir, "pretty.json");
    writeFileSync(config, JSON.stringify({ output: "pretty" }));
    const e = { ...env, FARM_CONFIG: config };
    const got = fast(["--version"], e);
    expect(got).toEqual({ answered: true, out: (await full(["--version"], e)).out });
    expect(got.out).toMatch(/^farm \S+\n$/);
  });

  const left: [string, string[], NodeJS.ProcessEnv][] = [
    ["a coordinator in FARM_COORDINATOR (its version is asked)", ["--version"], { FARM_COORDINATOR: "http://127.0.0.1:1" }],
    ["a bad output format (refused)", ["--version", "--output", "yaml"], {}],
    ["a bad FARM_OUTPUT (refused)", ["--version"], { FARM_OUTPUT: "yaml" }],
    ["--output twice (refused)", ["--version", "-o", "json", "-o", "json"], {}],
    ["more words", ["--version", "extra"], {}],
    ["--help", ["--help"], {}],
    ["another command", ["devices"], {}],
    ["nothing", [], {}],
  ];
  it.each(left)("%s: left to the CLI, nothing printed", (_name, argv, extra) => {
    expect(fast(argv, { ...env, ...extra })).toEqual({ answered: false, out: "" });
  });

  it("a coordinator named in the config file: left to the CLI", () => {
    const config = join(dir, "coordinator.json");
    writeFileSync(config, JSON.stringify({ coordinator: "http://127.0.0.1:1" }));
    expect(fast(["--version"], { ...env, FARM_CONFIG: config })).toEqual({ answered: false, out: "" });
  });
});
