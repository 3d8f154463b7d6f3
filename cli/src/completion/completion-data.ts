import type { CommandInfo } from "../tree/describe.js";

/** Every command, depth first. */
function allCommands(root: CommandInfo): CommandInfo[] {
  return [root, ...(root.commands ?? []).flatMap(allCommands)];
}

/** What every completion script needs, from the command tree: per command path its subcommands, flags, and the flags that take a value. */
export interface CompletionData {
  subs: Map<string, string[]>;
  flags: Map<string, string[]>;
  valued: Map<string, string[]>;
  /** A flag's accepted values, where it has a fixed set. */
  choices: Map<string, string[]>;
}

const visible = (c: CommandInfo) => !c.hidden;
const longOf = (flags: string) => /--[\w-]+/.exec(flags)?.[0] ?? flags;

export function completionData(tree: CommandInfo): CompletionData {
  const data: CompletionData = { subs: new Map(), flags: new Map(), valued: new Map(), choices: new Map([["--output", ["json", "pretty", "wide"]], ["-o", ["json", "pretty", "wide"]]]) };
  for (const c of allCommands(tree)) {
    if (c.hidden) continue;
    const subs = (c.commands ?? []).filter(visible).map((s) => s.name);
    if (subs.length) data.subs.set(c.path, subs);
    const opts = (c.options ?? []).filter((o) => !o.hidden);
    data.flags.set(c.path, opts.map((o) => longOf(o.flags)));
    const valued = opts.filter((o) => o.kind !== "flag").map((o) => longOf(o.flags));
    if (valued.length) data.valued.set(c.path, valued);
    for (const o of opts) if (o.choices) data.choices.set(longOf(o.flags), [...o.choices]);
  }
  return data;
}

/** A shell `case` arm list: one arm per key, printing the words. */
export function caseArms(map: Map<string, string[]>, arm: (key: string, words: string) => string): string {
  return [...map].map(([k, v]) => arm(k, v.join(" "))).join("\n");
}
