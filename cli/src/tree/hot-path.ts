import { flagName, type OptionDecl } from "../options/option-decl.js";
import type { LeafFlags } from "./run-leaf.js";
import { HOT_COMMANDS } from "./hot-commands.js";
import { shortcuts } from "./shortcuts.js";
import type { AnyLeaf } from "./spec.js";

/**
 * The hot path: the commands people and scripts run most often, in a loop,
 * parsed without commander or the command tree (about a fifth of a short
 * command's start-up; docs/performance.md, Issue 38). It is the same command,
 * not a second one: the same declarations (tree/shortcuts.ts), and the same
 * run-leaf.ts resolves the options and runs the action.
 *
 * It takes only command lines whose meaning is plain: known long flags
 * (`--name value`, `--name=value`, `--switch`), words that do not start with
 * `-`, and `--`. Anything else (help, short flags, an unknown or repeated
 * flag, a missing value, too few or too many words) is left to commander,
 * whose parse and error messages stay the only ones (hot-path.test.ts checks
 * both parsers agree on every command line it takes).
 */
export { HOT_COMMANDS };

const hot = new Map(
  shortcuts.filter((s): s is AnyLeaf => s.kind === "leaf" && HOT_COMMANDS.includes(s.name)).map((s) => [s.name, s]),
);

export interface HotCommand {
  spec: AnyLeaf;
  /** As commander names it: "farm shell". */
  path: string;
  flags: LeafFlags;
  args: string[];
}

/** The hot command these arguments (without -o/--output) name, parsed; undefined leaves them to commander. */
export function parseHot(argv: readonly string[]): HotCommand | undefined {
  const spec = hot.get(argv[0] ?? "");
  if (!spec) return undefined;
  const byLong = new Map<string, { key: string; decl: OptionDecl<unknown> }>();
  for (const [key, decl] of Object.entries(spec.options as Record<string, OptionDecl<unknown>>)) byLong.set(flagName(decl), { key, decl });
  const flags: LeafFlags = {};
  const args: string[] = [];
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === "--") {
      args.push(...argv.slice(i + 1));
      break;
    }
    if (!a.startsWith("-")) {
      args.push(a);
      continue;
    }
    if (!a.startsWith("--")) return undefined;
    const eq = a.indexOf("=");
    const found = byLong.get(a.slice(2, eq < 0 ? undefined : eq));
    if (!found) return undefined;
    const { key, decl } = found;
    if (decl.kind === "flag") {
      if (eq >= 0) return undefined;
      flags[key] = true;
      continue;
    }
    const value = eq >= 0 ? a.slice(eq + 1) : argv[++i];
    // A value that looks like a flag, or none: commander decides what it means.
    if (value === undefined || value === "" || value.startsWith("-")) return undefined;
    if (decl.kind === "list") flags[key] = [...((flags[key] as string[] | undefined) ?? []), value];
    else if (flags[key] !== undefined) return undefined;
    else flags[key] = value;
  }
  const declared = spec.args ?? [];
  const variadic = declared.at(-1)?.variadic === true;
  if (args.length < declared.filter((d) => d.required).length) return undefined;
  if (!variadic && args.length > declared.length) return undefined;
  return { spec, path: `farm ${spec.name}`, flags, args };
}
