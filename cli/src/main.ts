#!/usr/bin/env node
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { CliError, ErrorCodes } from "@farm/shared/errors";
import { FARM_VERSION } from "@farm/shared/version";
import { isGroup, type Command, type CommandNode } from "./command.js";
import { createPrinter, defaultFormat, type OutputFormat } from "./output.js";
import { agentsCommand } from "./commands/agents.js";
import { devicesCommand } from "./commands/devices.js";
import { tokenGroup } from "./commands/token.js";
import { coordinatorCommand } from "./commands/coordinator.js";
import { agentCommand } from "./commands/agent.js";
import { standaloneCommand } from "./commands/standalone.js";

export const commands: CommandNode[] = [
  standaloneCommand,
  coordinatorCommand,
  agentCommand,
  agentsCommand,
  devicesCommand,
  tokenGroup,
];

function rootHelp(): string {
  const lines = commands.map((c) => `  ${c.name.padEnd(12)} ${c.summary}`);
  return [
    `farm ${FARM_VERSION} — a device farm for mobile apps`,
    "",
    "Usage: farm <command> [flags]",
    "",
    "Commands:",
    ...lines,
    "",
    "Client flags: --coordinator URL, --token-file FILE, --output json|pretty, --timeout MS",
    "Environment: FARM_COORDINATOR, FARM_TOKEN, FARM_HOME, FARM_CONFIG",
    "Run `farm <command> --help` for a command's flags.",
  ].join("\n");
}

function commandHelp(c: Command, path: string): string {
  const flags = Object.entries(c.options).map(([name, o]) => `  --${name}${o.type === "string" ? " VALUE" : ""}`);
  return [`${path}: ${c.summary}`, "", `Usage: ${c.usage}`, "", "Flags:", ...flags].join("\n");
}

function groupHelp(name: string, cmds: Command[], summary: string): string {
  return [`farm ${name}: ${summary}`, "", "Subcommands:", ...cmds.map((c) => `  ${c.name.padEnd(10)} ${c.summary}`)].join("\n");
}

/** Picks the output format before parsing so even flag errors honour it. */
function outputFormat(argv: string[], env: NodeJS.ProcessEnv): OutputFormat {
  const i = argv.findIndex((a) => a === "--output" || a.startsWith("--output="));
  const v = i < 0 ? env["FARM_OUTPUT"] : argv[i]?.includes("=") ? argv[i]?.split("=")[1] : argv[i + 1];
  return v === "json" || v === "pretty" ? v : defaultFormat();
}

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const printer = createPrinter(outputFormat(argv, env));
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const [first, ...rest] = argv;
    if (first === undefined || first === "--help" || first === "-h" || first === "help") {
      process.stdout.write(rootHelp() + "\n");
      return first === undefined ? 1 : 0;
    }
    if (first === "--version" || first === "-v" || first === "version") {
      printer.result({ version: FARM_VERSION }, () => `farm ${FARM_VERSION}`);
      return 0;
    }
    const node = commands.find((c) => c.name === first);
    if (!node) throw new CliError(ErrorCodes.invalidArgument, `unknown command "${first}"; see \`farm --help\``, "command");
    let command: Command;
    let args: string[];
    let path = `farm ${node.name}`;
    if (isGroup(node)) {
      const [sub, ...subArgs] = rest;
      if (sub === undefined || sub === "--help" || sub === "-h") {
        process.stdout.write(groupHelp(node.name, node.commands, node.summary) + "\n");
        return sub === undefined ? 1 : 0;
      }
      const found = node.commands.find((c) => c.name === sub);
      if (!found) {
        throw new CliError(ErrorCodes.invalidArgument, `unknown command "farm ${node.name} ${sub}"; see \`farm ${node.name} --help\``, "command");
      }
      command = found;
      args = subArgs;
      path += ` ${sub}`;
    } else {
      command = node;
      args = rest;
    }
    if (args.includes("--help") || args.includes("-h")) {
      process.stdout.write(commandHelp(command, path) + "\n");
      return 0;
    }
    return await command.run({ args, env, printer, stopSignal: stop.signal });
  } catch (err) {
    printer.failure(err);
    return 1;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

const invokedDirectly = process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url);
if (invokedDirectly) {
  const code = await main(process.argv.slice(2));
  // Flush stdout before exiting so piped JSON is never cut short.
  process.stdout.write("", () => process.exit(code));
}
