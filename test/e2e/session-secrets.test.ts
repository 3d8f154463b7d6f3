/**
 * The proof that a session's secret is stored nowhere: `farm coordinator`
 * and `farm agent` as separate processes, a real adb server, a simulated
 * phone and the real CLI. A session carries its secret in its name, its
 * context, a shell command longer than the description keeps (the secret
 * past the cut), its output, typed text quoted as JSON, and a tap by a
 * JSON-quoted text; its policy labels an element of the screen. After its
 * export, every byte the coordinator and the agent wrote (databases with
 * their -wal files, images, evidence, logs, whole data dirs) and everything
 * the CLI showed is searched for every spelling of the secret: none
 * anywhere.
 */
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, SimDevice } from "../devsim/index.js";
import { farm, waitFor, type CliResult } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";
import { secretLeaks } from "@farm/shared/testing/secret-leaks";

// A quote, a slash and a backslash: every escaping spells it differently. Its
// first 8 characters are plain: a prefix left by a cut is found however escaped.
const SECRET = "Zq7Kx9WvpL\"2mN/8r\\T-e2e";
const JSON_SECRET = JSON.stringify(SECRET).slice(1, -1);

let lab: SplitFarm;
let phone: SimDevice;
let serial: string;

beforeAll(async () => {
  lab = await startSplitFarm("session-secrets");
  phone = new SimDevice({ serialno: "SECRET01" });
  serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
  await waitFor("the phone in farm devices", async () => {
    const list = ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string; properties: { physicalId: string } }[];
    return list.some((d) => d.serial === serial && d.state === "device" && d.properties.physicalId) ? true : undefined;
  });
}, 120_000);

afterAll(async () => {
  await phone?.close();
  await lab?.stop();
});

interface UiNode {
  text: string;
  contentDesc: string;
  children: UiNode[];
}
const flat = (roots: UiNode[]): UiNode[] => roots.flatMap((r) => [r, ...flat(r.children ?? [])]);

/** Every file under a directory, recursively. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

/** Where each file, or named text, gives the secret away. */
async function leaksIn(dir: string, texts: Record<string, string>): Promise<string[]> {
  const out: string[] = [];
  for (const f of await filesUnder(dir)) {
    const found = secretLeaks(await readFile(f), SECRET);
    if (found.length > 0) out.push(`${f.slice(dir.length)}: ${found.join(", ")}`);
  }
  for (const [name, text] of Object.entries(texts)) {
    const found = secretLeaks(text, SECRET);
    if (found.length > 0) out.push(`${name}: ${found.join(", ")}`);
  }
  return out;
}

const ok = (r: CliResult): CliResult => {
  expect(r.code, r.stdout + r.stderr).toBe(0);
  return r;
};

describe("a session's secret", () => {
  it("is stored nowhere by the coordinator or the agent, nor shown, after a session that used it everywhere", async () => {
    const lease = ok(await farm(["lease", "acquire", "--device", serial], lab.env));
    const token = String((lease.json["lease"] as { token: string }).token);
    const context = JSON.stringify({ login: { password: SECRET }, note: `pw=${JSON.stringify(SECRET)}` });
    // The policy labels the launcher's Settings icon: every tree of the session masks its text.
    const policy = join(lab.dir.path, "policy.json");
    await writeFile(policy, JSON.stringify({ redact: { labels: ["Settings"] } }));
    const started = ok(
      await farm(["session", "start", "--device", serial, "--name", `login as ${SECRET}`, "--context-json", context, "--secret", "APP_PASSWORD", "--policy", policy], { ...lab.env, FARM_LEASE: token, APP_PASSWORD: SECRET }),
    );
    const sessionId = String((started.json["session"] as { sessionId: string }).sessionId);
    const env = { ...lab.env, FARM_LEASE: token, FARM_DEVICE: serial, FARM_SESSION: sessionId };
    // What the farm shows back (not the caller's own output, which is theirs).
    const shown: Record<string, string> = { start: started.stdout + started.stderr };

    // Past the 200 characters a description (and an activity detail) keeps: the cut falls 9 characters into the secret.
    ok(await farm(["shell", "--", `echo '${"x".repeat(185)}${SECRET}' && echo '{"password":"${JSON_SECRET}"}'`], env));
    // Typed text holding the secret JSON-quoted, and a tap by a text that quotes it (not on the screen: a failed step).
    ok(await farm(["input", "text", `{"password":"${JSON_SECRET}"}`], env));
    const tap = await farm(["input", "tap", "--text", `{"password":"${JSON_SECRET}"}`], env);
    expect(tap.json).toMatchObject({ ok: false, code: "ELEMENT_NOT_FOUND" });

    const tree = ok(await farm(["ui", "tree"], env));
    const icon = flat(tree.json["roots"] as UiNode[]).find((e) => e.contentDesc === "Settings");
    expect(icon?.text).toBe("[redacted]");

    const steps = ok(await farm(["session", "show", sessionId, "--output", "json"], lab.env));
    const list = steps.json["steps"] as { action: string; result: { response?: { roots?: UiNode[] } } }[];
    expect(list.map((s) => s.action)).toEqual(["shell", "text", "tap", "ui-tree"]);
    expect(flat(list[3]?.result.response?.roots ?? []).find((e) => e.contentDesc === "Settings")?.text).toBe("[redacted]");
    shown["show"] = steps.stdout;
    shown["list"] = ok(await farm(["session", "list"], lab.env)).stdout;
    shown["activity"] = ok(await farm(["activity", "--device", serial], lab.env)).stdout;
    shown["ownership"] = ok(await farm(["device", "ownership", "status", "--device", serial], lab.env)).stdout;
    ok(await farm(["session", "export", sessionId, join(lab.dir.path, "export")], lab.env));
    ok(await farm(["session", "end", "--session", sessionId], lab.env));

    // While both run (their databases' -wal files as they are), then once they have stopped and flushed.
    const files = await filesUnder(lab.dir.path);
    expect(files.filter((f) => f.endsWith(".db-wal") || f.endsWith(".sqlite-wal") || f.endsWith("-wal")).length, files.join("\n")).toBeGreaterThanOrEqual(2);
    // The search finds what it looks for: the steps' masks are there.
    expect((await Promise.all(files.map((f) => readFile(f)))).some((b) => b.includes("[redacted]"))).toBe(true);
    expect(await leaksIn(lab.dir.path, shown)).toEqual([]);
    await lab.agent.stop();
    await lab.coordinator.stop();
    expect(await leaksIn(lab.dir.path, { ...shown, "coordinator log": lab.coordinator.stderr(), "agent log": lab.agent.stderr() })).toEqual([]);
    expect(steps.json["session"]).toMatchObject({ name: "login as [redacted]", context: { login: { password: "[redacted]" }, note: "pw=\"[redacted]\"" } });
  });
});
