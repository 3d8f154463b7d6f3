import type { CommanderError } from "commander";
import { CliError } from "../cli-error.js";
import { Errors } from "@farm/shared/error-codes";

/** Help (or nothing) was printed; the exit code is all that is left to give. */
export class HelpShown extends Error {
  constructor(readonly exitCode: number) {
    super("help shown");
    this.name = "HelpShown";
  }
}

/** What the failing command looked like, for messages and fields. */
export interface FailingCommand {
  /** "farm device shell" */
  path: string;
  /** Its positional arguments' names, in order. */
  argNames: readonly string[];
  /** Run as its group's default (`farm agent ...` is `farm agent run ...`): a stray word was meant as a subcommand. */
  isDefault: boolean;
}

/**
 * Commander's parse failures as the CLI reports them: Errors.INVALID_ARGUMENT with
 * the flag, argument or "command" at fault in `field`. Commander's own
 * wording is only read here; errors.test.ts pins each case.
 */
export function fromCommanderError(err: CommanderError, cmd: FailingCommand): Error {
  const see = `see \`${cmd.path} --help\``;
  const quoted = (re: RegExp) => re.exec(err.message)?.[1] ?? "";
  switch (err.code) {
    case "commander.helpDisplayed":
    case "commander.help":
    case "commander.version":
      return new HelpShown(err.exitCode);
    case "commander.unknownOption": {
      const flag = quoted(/unknown option '([^']+)'/);
      const name = flag.replace(/^-+/, "").replace(/=.*$/, "");
      if (name === "output" || name === "o") {
        return new CliError(Errors.INVALID_ARGUMENT, `--output must be json, pretty or wide (${cmd.path} writes no file)`, "output");
      }
      return new CliError(Errors.INVALID_ARGUMENT, `unknown flag ${flag.replace(/=.*$/, "")} for ${cmd.path}; ${see}`, name);
    }
    case "commander.unknownCommand":
      return new CliError(Errors.INVALID_ARGUMENT, `unknown command "${cmd.path} ${quoted(/unknown command '([^']+)'/)}"; ${see}`, "command");
    case "commander.excessArguments": {
      if (cmd.argNames.length === 0) {
        const parent = cmd.isDefault ? cmd.path.replace(/ \S+$/, "") : cmd.path;
        return new CliError(Errors.INVALID_ARGUMENT, `unknown command or stray argument for ${parent}; see \`${parent} --help\``, "command");
      }
      const last = cmd.argNames.at(-1) as string;
      return new CliError(Errors.INVALID_ARGUMENT, `too many arguments for ${cmd.path}: it takes ${cmd.argNames.map((a) => a.toUpperCase()).join(" ")}; ${see}`, last);
    }
    case "commander.missingArgument": {
      const name = quoted(/missing required argument '([^']+)'/).replace(/\.\.\.$/, "");
      return new CliError(Errors.INVALID_ARGUMENT, `${cmd.path} needs ${name.toUpperCase()}; ${see}`, name);
    }
    case "commander.optionMissingArgument": {
      const name = /--([\w-]+)/.exec(quoted(/option '([^']+)' argument missing/))?.[1] ?? "";
      return new CliError(Errors.INVALID_ARGUMENT, `--${name} needs a value`, name);
    }
    default:
      return new CliError(Errors.INVALID_ARGUMENT, err.message.replace(/^error: /, ""));
  }
}
