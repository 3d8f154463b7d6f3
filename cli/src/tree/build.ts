import { Command, Option, type CommanderError } from "@commander-js/extra-typings";
import { CliError } from "../cli-error.js";
import { Errors } from "@farm/shared/error-codes";
import type { OptionDecl } from "../options/option-decl.js";
import { flagName } from "../options/option-decl.js";
import type { OutputFormat, Printer } from "../output.js";
import type { Connections } from "@farm/client/connections";
import { fromCommanderError, HelpShown } from "./commander-errors.js";
import { describeOption } from "./help-text.js";
import type { CommandInfo } from "./describe.js";
import { runLeaf, type LeafFlags } from "./run-leaf.js";
import type { AnyLeaf, GroupSpec, NodeSpec } from "./spec.js";

/** What the built commands run with. */
export interface Runtime {
  env: NodeJS.ProcessEnv;
  printer: Printer;
  format: OutputFormat;
  /** The format was asked for, not defaulted from stdout not being a terminal. */
  formatChosen?: boolean;
  /** Where the format came from (output-format.ts). */
  formatSource?: string;
  stopSignal: AbortSignal;
  /** The tree's description, for commands that print it (completion). */
  commandTree(): CommandInfo;
  /** Where help goes. */
  writeOut(text: string): void;
  writeErr(text: string): void;
  /** The CLI's own entry point (a background process of itself). */
  entry?: string | undefined;
  /** False when stderr is captured (main run in process). */
  stderrIsTty?: boolean | undefined;
  /** The connections the run opens (closed when main returns). */
  connections: Connections;
  /** Set by the action that ran: the process exit code. */
  exitCode?: number;
  /** Tests: receives what a command would run with, instead of running it. */
  intercept?: (parsed: ParsedCommand) => void;
}

/** A command line parsed and resolved, before its action is loaded. */
export interface ParsedCommand {
  /** "farm device shell" (a shortcut's own path: "farm shell"). */
  path: string;
  spec: AnyLeaf;
  opts: Record<string, unknown>;
  sources: Record<string, string | undefined>;
  args: string[];
}

type AnyCommand = Command<unknown[], Record<string, unknown>, Record<string, unknown>>;

/** The declared options of a built command, by commander attribute name. */
const declsOf = new WeakMap<object, Map<string, { key: string; decl: OptionDecl<unknown> }>>();

/** Help, output and errors the same on every command of the tree. */
function configure(cmd: AnyCommand, rt: Runtime, failing: () => { path: string; argNames: string[]; isDefault: boolean }): void {
  cmd.configureOutput({ writeOut: (s) => rt.writeOut(s), writeErr: (s) => rt.writeErr(s), outputError: () => undefined });
  cmd.configureHelp({
    sortSubcommands: false,
    sortOptions: false,
    showGlobalOptions: false,
    subcommandTerm: (c) => [c.name(), ...c.registeredArguments.map((a) => (a.required ? `<${a.name()}${a.variadic ? "..." : ""}>` : `[${a.name()}${a.variadic ? "..." : ""}]`))].join(" "),
    optionDescription: (o) => {
      const d = declsOf.get(cmd)?.get(o.attributeName());
      return d ? describeOption(d.decl) : o.description;
    },
  });
  cmd.helpOption("-h, --help", "Show help for this command");
  cmd.exitOverride((err: CommanderError) => {
    // A CliError is a refusal before anything was sent (cli-error.ts), for every command.
    throw fromCommanderError(err, failing());
  });
}

function pathOf(cmd: AnyCommand | null): string {
  const names: string[] = [];
  for (let c: AnyCommand | null = cmd; c; c = c.parent as AnyCommand | null) names.unshift(c.name());
  return names.join(" ");
}

function argTerm(a: { name: string; required?: boolean | undefined; variadic?: boolean | undefined }): string {
  const inner = `${a.name}${a.variadic ? "..." : ""}`;
  return a.required ? `<${inner}>` : `[${inner}]`;
}

/** One commander option from a declaration; single values refuse a second occurrence, lists collect. */
function optionOf(decl: OptionDecl<unknown>): Option {
  const o = new Option(decl.flags, decl.description);
  if (decl.hidden) o.hideHelp();
  const name = flagName(decl);
  if (decl.kind === "value") {
    o.argParser((value: string, previous: unknown) => {
      // node's parseArgs and commander keep the last; acting on the wrong device is worse than refusing.
      if (previous !== undefined) throw new CliError(Errors.INVALID_ARGUMENT, `--${name} was given more than once; give it once`, name);
      return value;
    });
  } else if (decl.kind === "list") {
    o.argParser((value: string, previous: unknown) => [...((previous as string[] | undefined) ?? []), value]);
  }
  return o;
}

/** A leaf: commander parses it, run-leaf.ts resolves its options and runs its action. */
export function buildLeaf(spec: AnyLeaf, rt: Runtime, isDefault = false): AnyCommand {
  const cmd = new Command(spec.name) as unknown as AnyCommand;
  cmd.description(spec.summary + (spec.description ? `\n\n${spec.description}` : ""));
  for (const alias of spec.hiddenAliases ?? []) cmd.alias(alias);
  const byAttr = new Map<string, { key: string; decl: OptionDecl<unknown> }>();
  for (const [key, decl] of Object.entries(spec.options as Record<string, OptionDecl<unknown>>)) {
    const o = optionOf(decl);
    byAttr.set(o.attributeName(), { key, decl });
    cmd.addOption(o);
  }
  declsOf.set(cmd, byAttr);
  const args = spec.args ?? [];
  for (const a of args) cmd.argument(argTerm(a), a.description);
  cmd.usage(["[flags]", ...args.map(argTerm)].join(" "));
  if (spec.passThrough) cmd.passThroughOptions();
  if (spec.examples?.length) cmd.addHelpText("after", `\nExamples:\n${spec.examples.map((e) => `  ${e}`).join("\n")}`);
  configure(cmd, rt, () => ({ path: pathOf(cmd), argNames: args.map((a) => a.name), isDefault }));

  cmd.action(async () => {
    const flags: LeafFlags = {};
    for (const [attr, { key, decl }] of byAttr) {
      if (cmd.getOptionValueSource(attr) !== "cli") continue;
      flags[key] = decl.kind === "flag" ? true : (cmd.getOptionValue(attr) as string | string[]);
    }
    const positionals = cmd.processedArgs.flatMap((v: unknown) => (v === undefined ? [] : Array.isArray(v) ? (v as string[]) : [String(v)]));
    await runLeaf(spec, rt, pathOf(cmd), flags, positionals);
  });
  return cmd;
}

/** A group: its subcommands, its default one, and a clear refusal of a word that is none of them. */
export function buildGroup(spec: GroupSpec, rt: Runtime): AnyCommand {
  const cmd = new Command(spec.name) as unknown as AnyCommand;
  cmd.description(spec.summary + (spec.description ? `\n\n${spec.description}` : ""));
  for (const alias of spec.hiddenAliases ?? []) cmd.alias(alias);
  cmd.usage("<command> [flags]");
  configure(cmd, rt, () => ({ path: pathOf(cmd), argNames: [], isDefault: false }));
  // A subcommand that takes every word after its first argument needs its parent to stop at it.
  if (spec.commands.some((c) => c.kind === "leaf" && c.passThrough)) cmd.enablePositionalOptions();
  addChildren(cmd, spec.commands, rt, spec.defaultCommand);
  cmd.allowExcessArguments();
  cmd.action(() => {
    const [word] = cmd.args;
    if (word !== undefined) throw new CliError(Errors.INVALID_ARGUMENT, `unknown command "${pathOf(cmd)} ${word}"; see \`${pathOf(cmd)} --help\``, "command");
    rt.writeOut(cmd.helpInformation());
    rt.exitCode = 1;
  });
  return cmd;
}

export function addChildren(parent: AnyCommand, children: readonly NodeSpec[], rt: Runtime, defaultCommand?: string): void {
  for (const child of children) {
    const isDefault = child.name === defaultCommand;
    const built = child.kind === "leaf" ? buildLeaf(child, rt, isDefault) : buildGroup(child, rt);
    parent.addCommand(built as unknown as Command, { hidden: child.hidden === true, isDefault });
  }
}

/** Raised by a handler that found the error it reports. */
export function isHelpShown(err: unknown): err is HelpShown {
  return err instanceof HelpShown;
}
