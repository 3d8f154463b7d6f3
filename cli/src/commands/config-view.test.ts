import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../main.js";

/**
 * `farm config view` says where each setting in effect came from (a flag,
 * an environment variable by name, the config file's path, the local
 * standalone's files, or the default), and never prints a token's value.
 * main runs in process; nothing is dispatched to a coordinator.
 */
const dir = mkdtempSync(join(tmpdir(), "farm-config-view-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Not farmu_-shaped, so that even a first-characters mask would leak part of it.
const SECRET = "zq81SECRETtokenVALUE";

async function view(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await main(["config", "view", ...args], env, { out: (t) => (out += t), err: (t) => (err += t) });
  return { code, out, err };
}

function configFile(name: string, content: Record<string, unknown>): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(content), { mode: 0o600 });
  return path;
}

const leaks = (text: string) => [SECRET, SECRET.slice(0, 4), "SECRET"].filter((s) => text.includes(s));

describe("farm config view: sources", () => {
  it("values from the environment and the config file name their variable and the file; the token's value is not shown", async () => {
    const file = configFile("env.json", { insecure: true, output: "pretty" });
    const env = { FARM_CONFIG: file, FARM_HOME: join(dir, "no-home"), FARM_COORDINATOR: "http://127.0.0.1:9", FARM_TOKEN: SECRET, FARM_CA_FILE: join(dir, "ca.pem") };
    const { code, out, err } = await view(["-o", "json"], env);
    expect(code).toBe(0);
    const json = JSON.parse(out) as { effective: Record<string, unknown>; sources: Record<string, string | null> };
    expect(json.sources).toEqual({ coordinator: "FARM_COORDINATOR", token: "FARM_TOKEN", caFile: "FARM_CA_FILE", insecure: file, output: "--output" });
    expect(json.effective).toMatchObject({ coordinator: "http://127.0.0.1:9", token: "set", caFile: join(dir, "ca.pem"), insecure: true, output: "json" });
    expect(leaks(out + err)).toEqual([]);
  });

  it("pretty output has a source column; a token in the file is named by its key and file, not shown", async () => {
    const file = configFile("file.json", { coordinator: "http://127.0.0.1:8", token: SECRET, output: "pretty" });
    const env = { FARM_CONFIG: file, FARM_HOME: join(dir, "no-home") };
    const { code, out, err } = await view([], env);
    expect(code).toBe(0);
    // The table in effect, after the file's own keys.
    const table = out.slice(out.indexOf("in effect")).split("\n");
    const line = (key: string) => table.find((l) => l.trimStart().startsWith(`${key} `)) ?? "";
    expect(line("coordinator")).toMatch(new RegExp(`http://127\\.0\\.0\\.1:8\\s+${file}$`));
    expect(line("token")).toMatch(new RegExp(`^\\s*token\\s+set\\s+token in ${file}$`));
    expect(line("caFile")).toMatch(/\(system roots\)\s+default$/);
    expect(line("insecure")).toMatch(/false\s+default$/);
    expect(line("output")).toMatch(new RegExp(`pretty\\s+${file}$`));
    expect(leaks(out + err)).toEqual([]);
  });

  it("nothing configured: every setting says default, and no token", async () => {
    const env = { FARM_CONFIG: join(dir, "none.json"), FARM_HOME: join(dir, "empty-home") };
    const json = JSON.parse((await view(["-o", "json"], env)).out) as { effective: Record<string, unknown>; sources: Record<string, string | null> };
    expect(json.sources).toEqual({ coordinator: "default", token: null, caFile: "default", insecure: "default", output: "--output" });
    expect(json.effective).toMatchObject({ coordinator: "http://127.0.0.1:7420", token: null });
  });

  it("the local standalone's files: its standalone.json and admin token, by path", async () => {
    const home = join(dir, "standalone-home");
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, "standalone.json"), JSON.stringify({ url: "http://127.0.0.1:7" }));
    writeFileSync(join(home, "admin.token"), `${SECRET}\n`, { mode: 0o600 });
    const tokenFile = join(dir, "my.token");
    writeFileSync(tokenFile, SECRET, { mode: 0o600 });
    const env = { FARM_CONFIG: join(dir, "none.json"), FARM_HOME: home, FARM_OUTPUT: "json" };
    const standalone = JSON.parse((await view([], env)).out) as { sources: Record<string, string | null> };
    expect(standalone.sources).toMatchObject({ coordinator: join(home, "standalone.json"), token: join(home, "admin.token"), output: "FARM_OUTPUT" });
    const flagged = await view(["--token-file", tokenFile], env);
    expect((JSON.parse(flagged.out) as { sources: Record<string, string | null> }).sources).toMatchObject({ token: `--token-file ${tokenFile}` });
    expect(leaks(JSON.stringify(standalone) + flagged.out + flagged.err)).toEqual([]);
  });
});

describe("farm config set token", () => {
  it("says the token is set and where, without any of it", async () => {
    const file = join(dir, "set.json");
    let out = "";
    const code = await main(["config", "set", "token", SECRET, "-o", "pretty"], { FARM_CONFIG: file, FARM_HOME: join(dir, "no-home") }, { out: (t) => (out += t), err: (t) => (out += t) });
    expect(code).toBe(0);
    expect(out).toContain(`token = "(set)" in ${file}`);
    expect(leaks(out)).toEqual([]);
  });
});
