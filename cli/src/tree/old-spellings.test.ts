import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { ParsedCommand } from "./build.js";
import { parseOnly } from "./parse-for-test.js";

const dir = mkdtempSync(join(tmpdir(), "farm-spellings-"));
const agentConfig = join(dir, "agent.json");
writeFileSync(agentConfig, JSON.stringify({ coordinator: "http://c:1", name: "from-file" }));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const env = { FARM_CONFIG: join(dir, "none.json") };

/** The command a line names (a shortcut is its nested command) and what it means. */
type Meaning = (p: ParsedCommand) => Record<string, unknown>;
const canonical = (p: ParsedCommand) => (p.spec.shortcutOf ? `farm ${p.spec.shortcutOf}` : p.path);
const same: Meaning = (p) => ({ opts: p.opts, args: p.args });

/**
 * Old spellings (from the e2e suite, deploy/ and README before the
 * commander rebuild) and the new spelling each must mean the same as.
 */
const table: { old: string[]; now: string[]; meaning?: Meaning }[] = [
  { old: ["agent", "--coordinator", "http://c:1", "--name", "lab", "--no-adb-start", "--adb-port", "5555"], now: ["agent", "run", "--coordinator", "http://c:1", "--name", "lab", "--no-adb-start", "--adb-port", "5555"] },
  { old: ["agent", "--config", agentConfig], now: ["agent", "run", "--config", agentConfig] },
  { old: ["agents"], now: ["agent", "list"] },
  { old: ["devices", "--state", "device"], now: ["device", "list", "--state", "device"] },
  { old: ["shell", "--device", "S", "--", "echo", "hi"], now: ["device", "shell", "--device", "S", "--", "echo", "hi"] },
  { old: ["shell", "--request-id", "req-1", "--", "echo", "once"], now: ["device", "shell", "--request-id", "req-1", "--", "echo", "once"] },
  { old: ["input", "text", "hello farm"], now: ["device", "input", "text", "hello farm"] },
  { old: ["input", "tap", "x", "10", "--device", "S"], now: ["device", "input", "--device", "S", "tap", "x", "10"] },
  { old: ["logcat", "--lines", "5"], now: ["device", "logcat", "--lines", "5"] },
  { old: ["reboot", "--device", "S", "--agent", "lab-a", "--timeout", "3000"], now: ["device", "reboot", "--device", "S", "--agent", "lab-a", "--timeout", "3000"] },
  { old: ["install", "app.apk"], now: ["device", "install", "app.apk"] },
  {
    old: ["screenshot", "--output", "shot.png", "--device", "S"],
    now: ["device", "screenshot", "--device", "S", "shot.png"],
    meaning: (p) => ({ file: p.args[0] ?? p.opts["outputFile"], device: p.opts["device"] }),
  },
  {
    old: ["evidence", "pull", "ID", "--output-dir", "/abs/dir"],
    now: ["evidence", "pull", "ID", "/abs/dir"],
    meaning: (p) => ({ id: p.args[0], dir: p.args[1] ?? p.opts["outputDir"] }),
  },
  {
    old: ["evidence", "capture", "--device", "S", "--output-dir", "/abs/dir", "--timeout", "20000"],
    now: ["evidence", "capture", "--device", "S", "--timeout", "20000", "/abs/dir"],
    meaning: (p) => ({ dir: p.args[0] ?? p.opts["outputDir"], device: p.opts["device"], timeout: p.opts["timeout"] }),
  },
  {
    old: ["evidence", "video", "start", "--device", "S", "--duration-seconds", "30", "--output-dir", "/abs/dir"],
    now: ["evidence", "video", "start", "--device", "S", "--duration-seconds", "30", "/abs/dir"],
    meaning: (p) => ({ dir: p.args[0] ?? p.opts["outputDir"], duration: p.opts["durationSeconds"] }),
  },
  {
    old: ["token", "create", "--kind", "user", "--name", "a", "--admin"],
    now: ["token", "create", "--kind", "user", "--name", "a", "--role", "admin"],
    meaning: (p) => ({ kind: p.opts["kind"], name: p.opts["name"], admin: p.opts["admin"] === true || p.opts["role"] === "admin" }),
  },
  { old: ["device", "ownership", "status", "--device", "S"], now: ["device", "ownership", "status", "--device", "S"] },
  { old: ["device", "label", "set", "S", "rack=a1", "owner=ops"], now: ["device", "label", "set", "S", "rack=a1", "owner=ops"] },
  { old: ["lease", "run", "--device", "S", "--", "sh", "-c", "echo $FARM_DEVICE"], now: ["lease", "run", "--device", "S", "sh", "-c", "echo $FARM_DEVICE"] },
  { old: ["lease", "acquire", "--label", "rack=b2", "--api-level", "33..34", "--wait", "10m", "--ttl", "5m"], now: ["lease", "acquire", "--label", "rack=b2", "--api-level", "33..34", "--wait", "10m", "--ttl", "5m"] },
  { old: ["token", "create", "--kind", "agent", "--name", "n", "--token-file", "/x", "--output", "json"], now: ["token", "create", "--kind", "agent", "--name", "n", "--token-file", "/x", "-o", "json"] },
  { old: ["agents", "--output", "pretty"], now: ["agent", "list", "-o", "pretty"] },
];

describe("old spellings", () => {
  it.each(table)("$old.0 $old.1 $old.2 means what the new spelling means", async ({ old, now, meaning = same }) => {
    const a = await parseOnly(old, env);
    const b = await parseOnly(now, env);
    expect(a.error, `${old.join(" ")}: ${String(a.error)}`).toBeUndefined();
    expect(b.error, `${now.join(" ")}: ${String(b.error)}`).toBeUndefined();
    const pa = a.parsed as ParsedCommand;
    const pb = b.parsed as ParsedCommand;
    expect(canonical(pa)).toBe(canonical(pb));
    expect(meaning(pa)).toEqual(meaning(pb));
  });

  it("runs the agent from `farm agent` with flags only, its config file included", async () => {
    const { parsed } = await parseOnly(["agent", "--config", agentConfig], env);
    expect(parsed?.path).toBe("farm agent run");
    expect(parsed?.opts).toMatchObject({ coordinator: "http://c:1", name: "from-file" });
    expect(parsed?.sources).toMatchObject({ coordinator: "config", name: "config" });
  });

  it("keeps --version, -v and version, and help", async () => {
    for (const argv of [["--version"], ["-v"]]) expect(await parseOnly(argv, env)).toMatchObject({ exitCode: 0 });
    expect((await parseOnly(["version"], env)).parsed?.path).toBe("farm version");
    const help = await parseOnly(["--help"], env);
    expect(help.exitCode).toBe(0);
    expect(help.out).toContain("Usage: farm <command> [flags]");
    expect(help.out).toMatch(/^ {2}standalone /m);
    expect(await parseOnly(["help"], env)).toMatchObject({ exitCode: 0 });
    const none = await parseOnly([], env);
    expect(none.exitCode).toBe(1);
    expect(none.out).toContain("Usage: farm");
  });
});

describe("parse errors", () => {
  const refusal = async (argv: string[]) => {
    const r = await parseOnly(argv, env);
    expect(r.error, argv.join(" ")).toBeDefined();
    return r.error as { code: string; field?: string; outcome?: unknown };
  };

  it("name the field at fault, as the e2e suite expects", async () => {
    expect(await refusal(["nope"])).toMatchObject({ code: "INVALID_ARGUMENT", field: "command" });
    expect(await refusal(["device", "nope"])).toMatchObject({ field: "command" });
    expect(await refusal(["agent", "lsit"])).toMatchObject({ field: "command" });
    expect(await refusal(["devices", "--bogus"])).toMatchObject({ field: "bogus" });
    expect(await refusal(["devices", "--output", "yaml"])).toMatchObject({ field: "output" });
    expect(await refusal(["devices", "-o", "yaml"])).toMatchObject({ field: "output" });
    expect(await refusal(["--output", "yaml", "devices"])).toMatchObject({ field: "output" });
    expect(await refusal(["devices", "--output", "json", "--output", "pretty"])).toMatchObject({ field: "output" });
    expect(await refusal(["evidence", "capture", "--device", "A", "--device", "B"])).toMatchObject({ field: "device" });
    expect(await refusal(["evidence", "capture", "--device=A", "--device", "A"])).toMatchObject({ field: "device" });
    expect(await refusal(["agent", "drain"])).toMatchObject({ field: "agent" });
    expect(await refusal(["token", "revoke", "a", "b"])).toMatchObject({ field: "name" });
    expect(await refusal(["lease", "run", "--device", "S"])).toMatchObject({ field: "command" });
    expect(await refusal(["logcat", "--lines", "0"])).toMatchObject({ field: "lines" });
    expect(await refusal(["device", "ownership", "abandon", "--device", "S", "--action-id", "a"])).toMatchObject({ field: "reason" });
    expect(await refusal(["lease", "acquire", "--api-level", "x"])).toMatchObject({ field: "api-level" });
    expect(await refusal(["devices", "--timeout"])).toMatchObject({ field: "timeout" });
  });

  it("mark a refused device change as not dispatched", async () => {
    expect(await refusal(["shell", "--bogus"])).toMatchObject({ field: "bogus", outcome: { dispatched: false, ambiguous: false } });
    expect(await refusal(["device", "setprop", "--device", "S", "k"])).toMatchObject({ field: "value", outcome: { dispatched: false } });
  });

  it("keep repeatable flags repeatable, and words after -- for the device", async () => {
    const lease = await parseOnly(["lease", "acquire", "--label", "a=1", "--label", "b=2"], env);
    expect(lease.parsed?.opts["label"]).toEqual(["a=1", "b=2"]);
    const shell = await parseOnly(["shell", "--device", "A", "--", "--device", "B"], env);
    expect(shell.parsed?.opts["device"]).toBe("A");
    expect(shell.parsed?.args).toEqual(["--device", "B"]);
  });
});
