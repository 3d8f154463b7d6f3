import type { OptionSpec } from "./args.js";
import type { Printer } from "./output.js";

export interface CommandContext {
  /** Arguments after the command path (flags and positionals). */
  args: string[];
  env: NodeJS.ProcessEnv;
  printer: Printer;
  /** Resolves when the user asks a long-running command to stop. */
  stopSignal: AbortSignal;
}

/** A leaf command: `farm devices`, `farm token create`, ... */
export interface Command {
  name: string;
  summary: string;
  usage: string;
  options: OptionSpec;
  positionals?: boolean;
  /** Resolves to the process exit code. */
  run(ctx: CommandContext): Promise<number>;
}

/** A command with subcommands: `farm token`, `farm device ownership`. */
export interface CommandGroup {
  name: string;
  summary: string;
  commands: CommandNode[];
}

export type CommandNode = Command | CommandGroup;

export function isGroup(node: CommandNode): node is CommandGroup {
  return "commands" in node;
}

/** Flags every client command accepts. */
export const clientOptions: OptionSpec = {
  coordinator: { type: "string" },
  "token-file": { type: "string" },
  "ca-file": { type: "string" },
  insecure: { type: "boolean" },
  timeout: { type: "string" },
  help: { type: "boolean", short: "h" },
};

/** Flags of commands that act on one device. */
export const deviceOptions: OptionSpec = {
  ...clientOptions,
  device: { type: "string" },
  agent: { type: "string" },
  lease: { type: "string" },
  "request-id": { type: "string" },
};
