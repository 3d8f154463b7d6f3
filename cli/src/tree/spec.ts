import type { Connections } from "@farm/client/connections";
import type { ConfigFile } from "@farm/client/config";
import type { OptionSet, OptionValues } from "../options/option-decl.js";
import type { ValueSource } from "../options/resolve.js";
import type { OutputFormat, Printer } from "../output.js";
import type { CommandInfo } from "./describe.js";

/**
 * The command tree is declared in light modules (tree/*-commands.ts):
 * names, arguments, flags and descriptions, with each action behind a
 * dynamic import, so parsing and help never load SQLite, adb, sharp or the
 * coordinator. tree/build.ts turns the declarations into commander commands.
 */

/** What every action gets besides its own options. */
export interface CommandContext {
  env: NodeJS.ProcessEnv;
  printer: Printer;
  format: OutputFormat;
  /** The format was asked for (flag, FARM_OUTPUT, config), not defaulted from stdout not being a terminal. */
  formatChosen?: boolean;
  /** Where the format came from: --output, FARM_OUTPUT, the config file's path, or the default. */
  formatSource?: string | undefined;
  /** Aborted when the user asks a long-running command to stop (SIGINT, SIGTERM). */
  stopSignal: AbortSignal;
  /** The command tree's description (completion scripts are made from it). */
  commandTree(): CommandInfo;
  /** Where the command's own lines go: stdout and stderr, or main's sinks when it runs in process. */
  writeOut(text: string): void;
  writeErr(text: string): void;
  /** The CLI's own entry point, to start a background process of itself (adb connect). */
  entry?: string | undefined;
  /** False when stderr is captured (main run in process); undefined: the process's stderr decides. */
  stderrIsTty?: boolean | undefined;
  /** The connections this run opened, closed when main returns. */
  connections: Connections;
  /** The client config file and its path (config keys of client commands resolve from it). */
  configFile: ConfigFile;
  configPath: string;
}

export interface ActionInput<O extends OptionSet> {
  opts: OptionValues<O>;
  /** Where each option's value came from (flag, env, config, default). */
  sources: { [K in keyof O]?: ValueSource };
  /** Positional arguments, in order (a variadic one spread at the end). */
  args: string[];
  ctx: CommandContext;
}

/** A command's work; resolves to the process exit code. */
export type Action<O extends OptionSet> = (input: ActionInput<O>) => Promise<number>;

export interface ArgDecl {
  /** As help shows it: `serial`, `pairs` (variadic: `pairs...`). */
  name: string;
  description: string;
  required?: boolean;
  variadic?: boolean;
}

/** Which config file a command's `config` keys read: the client's, none, or a service's --config FILE. */
export type SettingsFile = { kind: "client" } | { kind: "none" } | { kind: "service"; option: string; env: string; keys: Readonly<Record<string, "string" | "number" | "boolean">> };

export interface LeafSpec<O extends OptionSet = OptionSet> {
  kind: "leaf";
  name: string;
  summary: string;
  /** Longer help text, shown under the summary. */
  description?: string;
  /** Old names that keep working; not shown. */
  hiddenAliases?: readonly string[];
  /** Left out of help, docs and completion: an old spelling or a reserved name. */
  hidden?: boolean;
  args?: readonly ArgDecl[];
  options: O;
  settings?: SettingsFile;
  /** A command that changes a device: a refusal before sending reports dispatched: false. */
  mutation?: boolean;
  /** Words after the first argument belong to it, flags included (`farm lease run -- COMMAND`). */
  passThrough?: boolean;
  /** Example invocations for help and docs. */
  examples?: readonly string[];
  /** A top-level shortcut generated from this nested command ("device shell"). */
  shortcutOf?: string;
  load: () => Promise<Action<O>>;
}

export interface GroupSpec {
  kind: "group";
  name: string;
  summary: string;
  description?: string;
  hiddenAliases?: readonly string[];
  hidden?: boolean;
  commands: readonly NodeSpec[];
  /** The subcommand that runs when none is named (`farm agent --coordinator URL` runs the agent). */
  defaultCommand?: string;
}

/** A leaf of any option set, as a tree holds them. */
export type AnyLeaf = LeafSpec<any>;
export type NodeSpec = AnyLeaf | GroupSpec;

export function leaf<O extends OptionSet>(spec: Omit<LeafSpec<O>, "kind">): LeafSpec<O> {
  return { kind: "leaf", ...spec };
}

export function group(spec: Omit<GroupSpec, "kind">): GroupSpec {
  return { kind: "group", ...spec };
}

/** The same command at another place in the tree (`farm shell` for `farm device shell`), generated, not copied. */
export function shortcut(spec: AnyLeaf, of: string, name = spec.name): AnyLeaf {
  return { ...spec, name, shortcutOf: of };
}
