/**
 * The CLI on commander, as people meet it: the new noun-verb spellings
 * against a real standalone, progress on a terminal only, completion
 * scripts, `farm --version` with and without a coordinator, the config
 * file, and --verbose request ids.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, stat, writeFile } from "node:fs/promises";
import { pathToFileURL } from "node:url";
import { join } from "node:path";
import { spawn as ptySpawn } from "node-pty";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FARM_VERSION } from "@farm/shared/version";
import type { SimDevice } from "../devsim/index.js";
import { farm, farmBin, waitFor } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;
let phones: { device: SimDevice; serial: string }[] = [];

beforeAll(async () => {
  lab = await startLab("cli-commander");
  phones = [await lab.addDevice({ serialno: "CMDR0001" }), await lab.addDevice({ serialno: "CMDR0002" })];
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

/** Runs farm on a pseudo-terminal (stdout and stderr both the terminal); resolves with everything it drew and its exit code. */
function onTerminal(args: string[], env: NodeJS.ProcessEnv, whileRunning?: (screen: () => string) => Promise<void>): Promise<{ screen: string; code: number }> {
  // CI is dropped: progress is never shown in CI, and this test is about a person's terminal.
  const { CI: _ci, ...base } = process.env;
  const term = ptySpawn(process.execPath, [farmBin, ...args], { cols: 120, rows: 30, env: { ...base, ...env, TERM: "xterm" } as Record<string, string> });
  let screen = "";
  term.onData((d) => (screen += d));
  const exit = new Promise<number>((resolve) => term.onExit(({ exitCode }) => resolve(exitCode)));
  return (async () => {
    if (whileRunning) await whileRunning(() => screen);
    const code = await exit;
    return { screen, code };
  })();
}

describe("new spellings end to end", () => {
  it("lists devices and agents under the noun, wide adds columns", async () => {
    const list = await farm(["device", "list"], lab.env);
    expect(list.json).toMatchObject({ ok: true });
    expect((list.json["devices"] as { serial: string }[]).map((d) => d.serial)).toEqual(expect.arrayContaining(phones.map((p) => p.serial)));
    const pretty = await farm(["devices", "-o", "pretty"], lab.env);
    const wide = await farm(["device", "list", "-o", "wide"], lab.env);
    expect(wide.code).toBe(0);
    const header = (s: string) => s.split("\n")[0] ?? "";
    expect(header(wide.stdout).split(/\s{2,}/).length).toBeGreaterThan(header(pretty.stdout).split(/\s{2,}/).length);
    expect((await farm(["agent", "list"], lab.env)).json).toMatchObject({ ok: true, agents: [expect.objectContaining({ online: true })] });
    expect((await farm(["device", "show", phones[0]!.serial], lab.env)).json).toMatchObject({ ok: true, devices: [expect.objectContaining({ serial: phones[0]!.serial })] });
  });

  it("takes files as arguments: screenshot FILE, evidence pull ID DIR", async () => {
    const phone = phones[0]!;
    const lease = await farm(["lease", "acquire", "--device", phone.serial], lab.env);
    const leased = { ...lab.env, FARM_LEASE: (lease.json["lease"] as { token: string }).token, FARM_DEVICE: phone.serial };
    const shot = join(lab.dir.path, "shot.png");
    const r = await farm(["device", "screenshot", shot], leased);
    expect(r.json).toMatchObject({ ok: true, file: shot });
    expect((await stat(shot)).size).toBeGreaterThan(0);
    expect((await farm(["screenshot", shot], leased)).json).toMatchObject({ ok: false, code: "EVIDENCE_OUTPUT_EXISTS", field: "output" });
    expect((await farm(["screenshot", shot, "--output", shot], leased)).json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "output" });
    await farm(["lease", "release"], leased);

    const stored = await farm(["evidence", "capture", "--device", phone.serial], lab.env);
    const id = String(stored.json["evidenceId"]);
    const dir = join(lab.dir.path, "pulled");
    expect((await farm(["evidence", "pull", id, dir], lab.env)).json).toMatchObject({ ok: true, evidenceId: id, status: "complete" });
    expect(existsSync(join(dir, "manifest.json"))).toBe(true);
    expect((await farm(["evidence", "pull", id, join(lab.dir.path, "x"), "--output-dir", join(lab.dir.path, "y")], lab.env)).json).toMatchObject({ ok: false, field: "output-dir" });
  });

  it("prints each call's request id and time with --verbose, on stderr", async () => {
    const r = await farm(["devices", "--verbose"], lab.env);
    expect(r.json).toMatchObject({ ok: true });
    expect(r.stderr).toMatch(/farm: farm\.v1\.RegistryService\/ListDevices x-request-id=[0-9a-f-]{36} ok \d+ ms/);
    expect((await farm(["devices"], lab.env)).stderr).toBe("");
  });
});

describe("progress", () => {
  it("shows a lease wait's queue position on a terminal, and nothing with -o json or off a terminal", async () => {
    const phone = phones[1]!;
    const held = await farm(["lease", "acquire", "--device", phone.serial, "--ttl", "1m"], lab.env);
    const token = (held.json["lease"] as { token: string }).token;
    const waited = await onTerminal(["lease", "acquire", "--device", phone.serial, "--wait", "30s", "--ttl", "1m", "-o", "pretty"], lab.env, async (screen) => {
      await waitFor("the queue position on the terminal", () => (/position 1 of 1/.test(screen()) ? true : undefined), { timeoutMs: 20_000 });
      await farm(["lease", "release", "--lease", token], lab.env);
    });
    expect(waited.code).toBe(0);
    expect(waited.screen).toMatch(/waiting for a device: position 1 of 1 in the queue/);
    expect(waited.screen).toContain(`FARM_DEVICE=${phone.serial}`);
    const again = (await farm(["lease", "list"], lab.env)).json["leases"] as { serial: string; leaseId: string }[];
    const mine = again.find((l) => l.serial === phone.serial);
    expect(mine).toBeDefined();
    // Release it: the second acquire printed its token only on the terminal.
    const listed = await farm(["lease", "acquire", "--device", phone.serial, "--wait", "0s"], lab.env);
    expect(listed.json).toMatchObject({ ok: false });

    // The same wait with json output, on a terminal: no progress line, only the JSON.
    const json = await onTerminal(["lease", "acquire", "--device", phone.serial, "--wait", "2s", "-o", "json"], lab.env);
    expect(json.screen).not.toMatch(/waiting for a device/);
    expect(json.screen).toMatch(/"ok":false/);
    // Off a terminal, pretty: nothing on stderr but the error line.
    const piped = await farm(["lease", "acquire", "--device", phone.serial, "--wait", "2s", "-o", "pretty"], lab.env);
    expect(piped.stderr).not.toMatch(/waiting for a device/);
  });

  it("shows a pull's bytes and rate on a terminal, and nothing with -o json", async () => {
    const stored = await farm(["evidence", "capture", "--device", phones[0]!.serial], lab.env);
    const id = String(stored.json["evidenceId"]);
    const pretty = await onTerminal(["evidence", "pull", id, join(lab.dir.path, "pull-pretty"), "-o", "pretty"], lab.env);
    expect(pretty.code).toBe(0);
    expect(pretty.screen).toMatch(/pulling [0-9a-f-]+: [\d.]+ (B|KiB|MiB) at [\d.]+ (B|KiB|MiB)\/s/);
    const json = await onTerminal(["evidence", "pull", id, join(lab.dir.path, "pull-json"), "-o", "json"], lab.env);
    expect(json.code).toBe(0);
    expect(json.screen).not.toMatch(/pulling/);
    const piped = await farm(["evidence", "pull", id, join(lab.dir.path, "pull-piped"), "-o", "pretty"], lab.env);
    expect(piped.stderr).toBe("");
  });
});

describe("completion", () => {
  it("loads in bash and completes nouns, verbs and flags", () => {
    const r = spawnSync("bash", ["-c", `source <(${JSON.stringify(process.execPath)} ${JSON.stringify(farmBin)} completion bash) && complete -p farm`], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain("-F _farm farm");
    const complete = (line: string) => {
      const words = line.split(" ");
      const script = `source <(${JSON.stringify(process.execPath)} ${JSON.stringify(farmBin)} completion bash); COMP_WORDS=(${words.map((w) => JSON.stringify(w)).join(" ")}); COMP_CWORD=${
        words.length - 1
      }; _farm; printf '%s\\n' "\${COMPREPLY[@]}"`;
      return spawnSync("bash", ["-c", script], { encoding: "utf8" }).stdout.split("\n").filter(Boolean);
    };
    expect(complete("farm dev")).toEqual(expect.arrayContaining(["device", "devices"]));
    expect(complete("farm device sh")).toEqual(expect.arrayContaining(["shell", "show"]));
    expect(complete("farm device shell --dev")).toEqual(["--device"]);
    expect(complete("farm devices -o ")).toEqual(["json", "pretty", "wide"]);
    expect(complete("farm token create --kind ")).toEqual(["agent", "user"]);
  });

  it("generates zsh and fish scripts", () => {
    for (const shell of ["zsh", "fish"]) {
      const r = spawnSync(process.execPath, [farmBin, "completion", shell], { encoding: "utf8" });
      expect(r.status).toBe(0);
      expect(r.stdout.length).toBeGreaterThan(1000);
      expect(r.stdout).toContain(shell === "zsh" ? "compdef _farm farm" : "complete -c farm");
    }
  });
});

describe("lazy loading", () => {
  it("parses, prints help and --version without loading Connect, generated code or any command's implementation", async () => {
    const hooks = join(lab.dir.path, "record-imports.mjs");
    const log = join(lab.dir.path, "imports.txt");
    await writeFile(hooks, `import { appendFileSync } from "node:fs";\nexport async function resolve(s, c, next) { const r = await next(s, c); appendFileSync(${JSON.stringify(log)}, r.url + "\\n"); return r; }\n`);
    const register = `data:text/javascript,${encodeURIComponent(`import { register } from "node:module"; register(${JSON.stringify(pathToFileURL(hooks).href)});`)}`;
    for (const args of [["--version"], ["--help"], ["device", "shell", "--help"], ["devices", "--bogus"]]) {
      await writeFile(log, "");
      spawnSync(process.execPath, ["--import", register, farmBin, ...args], { env: { ...process.env, ...lab.env }, encoding: "utf8" });
      const loaded = (await readFile(log, "utf8")).split("\n").filter(Boolean);
      expect(loaded.length, args.join(" ")).toBeGreaterThan(10);
      expect(loaded.filter((u) => /@connectrpc|\/gen\/|better-sqlite3|sharp|node-pty|\/(agent|coordinator)\/dist\/|\/cli\/dist\/commands\//.test(u)), args.join(" ")).toEqual([]);
    }
  });
});

describe("farm --version", () => {
  it("adds the configured coordinator's version, and says unreachable quickly when it does not answer", async () => {
    const url = String(lab.standalone.ready["url"]);
    const up = await farm(["--version"], { ...lab.env, FARM_COORDINATOR: url });
    expect(up.json).toEqual({ ok: true, version: FARM_VERSION, coordinator: { url, version: FARM_VERSION } });
    const started = Date.now();
    const down = await farm(["--version"], { ...lab.env, FARM_COORDINATOR: "http://127.0.0.1:1" });
    expect(down.code).toBe(0);
    expect(down.json).toEqual({ ok: true, version: FARM_VERSION, coordinator: { url: "http://127.0.0.1:1", version: "unreachable" } });
    expect(Date.now() - started).toBeLessThan(5_000);
    // Not configured (the standalone is found, not configured): the CLI's version alone.
    expect((await farm(["--version"], lab.env)).json).toEqual({ ok: true, version: FARM_VERSION });
  });
});

describe("farm config", () => {
  it("sets keys in the file (0600) that later commands read, and shows where each setting comes from", async () => {
    const file = join(lab.dir.path, "config.json");
    const env = { ...lab.env, FARM_CONFIG: file };
    const url = String(lab.standalone.ready["url"]);
    expect((await farm(["config", "set", "coordinator", url], env)).json).toMatchObject({ ok: true, key: "coordinator", value: url });
    expect((await farm(["config", "set", "output", "yaml"], env)).json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "value" });
    expect((await farm(["config", "set", "colour", "red"], env)).json).toMatchObject({ ok: false, field: "key" });
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file, "utf8"))).toEqual({ coordinator: url });
    const view = await farm(["config", "view"], env);
    expect(view.json).toMatchObject({ ok: true, path: file, file: { coordinator: url }, effective: { coordinator: url, coordinatorSource: file } });
    const overridden = await farm(["config", "view"], { ...env, FARM_COORDINATOR: "http://127.0.0.1:2" });
    expect(overridden.json).toMatchObject({ effective: { coordinator: "http://127.0.0.1:2", coordinatorSource: "FARM_COORDINATOR" } });
    expect((await farm(["config", "set", "--unset", "coordinator"], env)).json).toMatchObject({ ok: true });
    expect(JSON.parse(await readFile(file, "utf8"))).toEqual({});
  });
});
