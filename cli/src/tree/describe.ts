import type { OptionDecl, OptionSet } from "../options/option-decl.js";
import { flagName } from "../options/option-decl.js";
import { defaultText } from "./help-text.js";
import { commandTree, rootOptions, rootSummary } from "./program.js";
import type { ArgDecl, NodeSpec } from "./spec.js";

/** One flag as help, docs, completion and the tree snapshot see it. */
export interface OptionInfo {
  flags: string;
  name: string;
  kind: OptionDecl<unknown>["kind"];
  description: string;
  env?: string;
  config?: string;
  default?: string;
  choices?: readonly string[];
  required?: boolean;
  hidden?: boolean;
}

export interface CommandInfo {
  /** "farm device shell" */
  path: string;
  name: string;
  summary: string;
  description?: string;
  hidden?: boolean;
  hiddenAliases?: readonly string[];
  /** The group's subcommand that runs when none is named. */
  defaultCommand?: string;
  shortcutOf?: string;
  mutation?: boolean;
  passThrough?: boolean;
  args?: readonly ArgDecl[];
  options?: OptionInfo[];
  examples?: readonly string[];
  commands?: CommandInfo[];
}

export function optionInfo(decl: OptionDecl<unknown>): OptionInfo {
  const d = defaultText(decl);
  return {
    flags: decl.flags,
    name: flagName(decl),
    kind: decl.kind,
    description: decl.description,
    ...(decl.env ? { env: decl.env } : {}),
    ...(decl.config ? { config: decl.config } : {}),
    ...(d !== undefined ? { default: d } : {}),
    ...(decl.choices ? { choices: decl.choices } : {}),
    ...(decl.required ? { required: true } : {}),
    ...(decl.hidden ? { hidden: true } : {}),
  };
}

const optionsOf = (set: OptionSet) => Object.values(set).map(optionInfo);

function describeNode(node: NodeSpec, parent: string): CommandInfo {
  const path = `${parent} ${node.name}`;
  const common = {
    path,
    name: node.name,
    summary: node.summary,
    ...(node.description ? { description: node.description } : {}),
    ...(node.hidden ? { hidden: true } : {}),
    ...(node.hiddenAliases?.length ? { hiddenAliases: node.hiddenAliases } : {}),
  };
  if (node.kind === "group") {
    return { ...common, ...(node.defaultCommand ? { defaultCommand: node.defaultCommand } : {}), commands: node.commands.map((c) => describeNode(c, path)) };
  }
  return {
    ...common,
    ...(node.shortcutOf ? { shortcutOf: `farm ${node.shortcutOf}` } : {}),
    ...(node.mutation ? { mutation: true } : {}),
    ...(node.passThrough ? { passThrough: true } : {}),
    ...(node.args?.length ? { args: node.args } : {}),
    options: optionsOf(node.options),
    ...(node.examples?.length ? { examples: node.examples } : {}),
  };
}

/** The whole command tree, from its declarations. */
export function describeTree(): CommandInfo {
  return { path: "farm", name: "farm", summary: rootSummary.replace(/^farm \S+: /, ""), options: optionsOf(rootOptions), commands: commandTree.map((c) => describeNode(c, "farm")) };
}

/** Every command, depth first. */
export function allCommands(root: CommandInfo = describeTree()): CommandInfo[] {
  return [root, ...(root.commands ?? []).flatMap((c) => allCommands(c))];
}
