import { describe, expect, it } from "vitest";
import { Errors } from "@farm/shared/errors";
import { allCommands, describeTree } from "./describe.js";
import { commandsFor, commandTree, rootOptions } from "./program.js";
import { parseOnly } from "./parse-for-test.js";

describe("the command tree", () => {
  it("matches its committed snapshot (names, aliases, flags, descriptions, env and config bindings)", async () => {
    // A deliberate change: `npx vitest run cli/src/tree -u`, and review the diff of command-tree.snapshot.json.
    await expect(JSON.stringify(describeTree(), null, 2) + "\n").toMatchFileSnapshot("./command-tree.snapshot.json");
  });

  it("builds only the top-level command the arguments name; all of them for help, an option or an unknown word", () => {
    expect(commandsFor(["evidence", "capture", "--device", "x"]).map((n) => n.name)).toEqual(["evidence"]);
    expect(commandsFor(["devices"]).map((n) => n.name)).toEqual(["devices"]);
    for (const argv of [[], ["help", "evidence"], ["--help"], ["evidance"], ["--output", "yaml", "devices"]]) expect(commandsFor(argv), argv.join(" ")).toBe(commandTree);
  });

  it("has the noun-verb tree, with the common verbs also at the top level", () => {
    const paths = new Set(allCommands().map((c) => c.path));
    for (const p of [
      "farm device list",
      "farm device show",
      "farm device shell",
      "farm device input",
      "farm device screenshot",
      "farm device install",
      "farm device logcat",
      "farm device reboot",
      "farm device props",
      "farm device setprop",
      "farm device pin",
      "farm device label set",
      "farm device label rm",
      "farm device label list",
      "farm device ownership status",
      "farm device ownership reconcile",
      "farm device ownership receipt",
      "farm device ownership abandon",
      "farm device alias accept",
      "farm device alias reject",
      "farm agent list",
      "farm agent run",
      "farm agent drain",
      "farm agent remove",
      "farm lease acquire",
      "farm lease renew",
      "farm lease release",
      "farm lease list",
      "farm lease run",
      "farm evidence capture",
      "farm evidence list",
      "farm evidence pull",
      "farm evidence verify",
      "farm evidence video start",
      "farm evidence video status",
      "farm evidence video stop",
      "farm evidence video inspect",
      "farm evidence video release",
      "farm evidence video list",
      "farm token create",
      "farm token list",
      "farm token revoke",
      "farm privacy rotate-key",
      "farm app endpoint",
      "farm app remove-forward",
      "farm activity",
      "farm tls self-signed",
      "farm standalone",
      "farm coordinator",
      "farm config view",
      "farm config set",
      "farm completion bash",
      "farm completion zsh",
      "farm completion fish",
      "farm session start",
      "farm session end",
      "farm session list",
      "farm session show",
      "farm shell",
      "farm devices",
      "farm agents",
      "farm input",
      "farm logcat",
      "farm reboot",
      "farm screenshot",
      "farm install",
    ]) {
      expect(paths, p).toContain(p);
    }
  });

  it("generates each top-level verb from its nested definition", () => {
    const byPath = new Map(allCommands().map((c) => [c.path, c]));
    for (const [top, nested] of [["farm shell", "farm device shell"], ["farm devices", "farm device list"], ["farm agents", "farm agent list"], ["farm screenshot", "farm device screenshot"]] as const) {
      const a = byPath.get(top);
      const b = byPath.get(nested);
      expect(a?.shortcutOf).toBe(nested);
      expect({ ...a, path: "", name: "", shortcutOf: undefined }).toEqual({ ...b, path: "", name: "", shortcutOf: undefined });
    }
  });

  it("describes every command and flag, and binds only known variables", () => {
    for (const c of allCommands()) {
      expect(c.summary, c.path).not.toBe("");
      for (const o of c.options ?? []) {
        expect(o.description, `${c.path} --${o.name}`).not.toBe("");
        if (o.env) expect(o.env, `${c.path} --${o.name}`).toMatch(/^(FARM_[A-Z_]+|ANDROID_ADB_SERVER_PORT)$/);
      }
    }
  });

  it("declares the root's flags as commander parses them", async () => {
    const help = (await parseOnly(["--help"])).out;
    expect(help).toContain(rootOptions.output.flags);
    expect(help).toContain(rootOptions.version.flags);
  });

  it("uses only codes of the shared error table for its own refusals", async () => {
    const r = await parseOnly(["nope"]);
    expect(Object.keys(Errors)).toContain((r.error as { code: string }).code);
  });
});
