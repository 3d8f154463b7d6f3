import { Command } from "@commander-js/extra-typings";
import { FARM_VERSION } from "@farm/shared/version";
import { CliError } from "../cli-error.js";
import { Errors } from "@farm/shared/error-codes";
import { flag } from "../options/option-decl.js";
import { outputOption } from "../options/output-format.js";
import { adbGroup } from "./adb-commands.js";
import { agentGroup } from "./agent-commands.js";
import { appGroup } from "./app-commands.js";
import { addChildren, type Runtime } from "./build.js";
import { fromCommanderError } from "./commander-errors.js";
import { deviceGroup } from "./device-commands.js";
import { evidenceGroup } from "./evidence-commands.js";
import { describeOption } from "./help-text.js";
import { leaseGroup } from "./lease-commands.js";
import { activityCommand, completionGroup, configGroup, versionCommand } from "./misc-commands.js";
import { sessionGroup } from "./session-commands.js";
import { coordinatorCommand, standaloneCommand } from "./service-commands.js";
import { shortcuts } from "./shortcuts.js";
import type { NodeSpec } from "./spec.js";
import { privacyGroup, tokenGroup, tlsGroup } from "./admin-commands.js";
import { uiGroup } from "./ui-commands.js";
import { assertGroup, waitCommand } from "./check-commands.js";

export { shortcuts };

/** Flags of `farm` itself. */
export const rootOptions = {
  output: outputOption,
  version: flag("-v, --version", "Print the CLI's version and, when a coordinator is configured, the coordinator's"),
};

/** The whole tree under `farm`, in help order. */
export const commandTree: readonly NodeSpec[] = [
  deviceGroup,
  uiGroup,
  assertGroup,
  waitCommand,
  agentGroup,
  leaseGroup,
  adbGroup,
  evidenceGroup,
  sessionGroup,
  tokenGroup,
  privacyGroup,
  appGroup,
  activityCommand,
  tlsGroup,
  standaloneCommand,
  coordinatorCommand,
  configGroup,
  completionGroup,
  ...shortcuts,
  versionCommand,
];

export const rootSummary = `farm ${FARM_VERSION}: a device farm for mobile apps`;

/**
 * The top-level commands worth building for these arguments: only the one
 * they name first, when they name one (most of a short command's start-up
 * would otherwise build options of commands it never runs), else all of
 * them (root help, `farm help`, an unknown word and its error).
 */
export function commandsFor(argv: readonly string[]): readonly NodeSpec[] {
  const word = argv[0];
  if (word === undefined || word.startsWith("-")) return commandTree;
  const named = commandTree.filter((n) => n.name === word || (n.hiddenAliases ?? []).includes(word));
  return named.length > 0 ? named : commandTree;
}

/** The commander program for the tree (or the part of it `argv` needs); `onVersion` prints `farm --version`. */
export function buildProgram(rt: Runtime, onVersion: () => Promise<number>, argv?: readonly string[]) {
  const program = new Command("farm")
    // Literal flags keep commander's typing; program.test.ts checks they match rootOptions.
    .option("-o, --output <format>", outputOption.description)
    .option("-v, --version", rootOptions.version.description)
    .argument("[command]");
  program
    .description(rootSummary)
    .usage("<command> [flags]")
    .enablePositionalOptions()
    .configureOutput({ writeOut: (s) => rt.writeOut(s), writeErr: (s) => rt.writeErr(s), outputError: () => undefined })
    .configureHelp({
      sortSubcommands: false,
      subcommandTerm: (c) => c.name(),
      optionDescription: (o) => (o.long === "--output" ? describeOption(outputOption) : o.description),
    })
    .helpOption("-h, --help", "Show help (farm COMMAND --help for a command's)")
    .allowExcessArguments()
    .exitOverride((err) => {
      throw fromCommanderError(err, { path: "farm", argNames: [], isDefault: false });
    })
    .addHelpText(
      "after",
      [
        "",
        "Environment: FARM_COORDINATOR, FARM_TOKEN, FARM_CA_FILE, FARM_INSECURE, FARM_DEVICE, FARM_LEASE, FARM_OUTPUT, FARM_CONFIG, FARM_HOME",
        "Config file: FARM_CONFIG, else ~/.config/farm/config.json (farm config view|set); a flag beats the environment, which beats the file.",
        "Run `farm COMMAND --help` for a command's flags; docs/cli.md lists them all.",
      ].join("\n"),
    );
  // `farm --output yaml devices`: a format value takeOutputFormat did not take is not one.
  program.hook("preSubcommand", (cmd) => {
    const given = cmd.opts().output;
    if (given !== undefined) throw new CliError(Errors.INVALID_ARGUMENT, `--output must be json, pretty or wide, got "${given}"`, "output");
  });
  addChildren(program as never, argv ? commandsFor(argv) : commandTree, rt);
  program.action(async (word, opts) => {
    // `farm help [COMMAND...]`: commander offers it only to programs without an action of their own.
    if (word === "help") {
      let target: { commands: readonly unknown[]; helpInformation(): string } = program;
      for (const name of program.args.slice(1)) {
        const next = (target.commands as Command[]).find((c) => c.name() === name || c.aliases().includes(name));
        if (!next) throw new CliError(Errors.INVALID_ARGUMENT, `unknown command "${program.args.slice(1).join(" ")}"; see \`farm --help\``, "command");
        target = next as never;
      }
      rt.writeOut(target.helpInformation());
      rt.exitCode = 0;
      return;
    }
    if (opts.output !== undefined) throw new CliError(Errors.INVALID_ARGUMENT, `--output must be json, pretty or wide, got "${opts.output}"`, "output");
    if (word !== undefined) throw new CliError(Errors.INVALID_ARGUMENT, `unknown command "${word}"; see \`farm --help\``, "command");
    if (opts.version) {
      rt.exitCode = await onVersion();
      return;
    }
    rt.writeOut(program.helpInformation());
    rt.exitCode = 1;
  });
  return program;
}
