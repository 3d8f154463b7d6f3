import { CliError } from "../cli-error.js";
import { configFilePath, configuredOutput } from "@farm/client/config";
import { Errors } from "@farm/shared/error-codes";
import { defaultFormat, outputFormats, type OutputFormat } from "../output.js";
import { text } from "./option-decl.js";
import { resolveOption } from "./resolve.js";

/** `-o/--output`, declared on the root for help, docs and completion; read by takeOutputFormat before parsing. */
export const outputOption = {
  ...text("-o, --output <format>", "Output format: json (the default when stdout is not a terminal), pretty, or wide (pretty with more columns)", {
    env: "FARM_OUTPUT",
    config: "output",
    choices: outputFormats,
  }),
  defaultText: "pretty on a terminal, else json",
};

export interface FormatChoice {
  format: OutputFormat;
  /** argv without the format flags. */
  rest: string[];
  /** A format value from the environment or the config file that is not one. */
  bad?: string;
  /** --output given twice. */
  repeated?: boolean;
  /** Asked for (flag, FARM_OUTPUT or the config file), not the default for where stdout goes. */
  chosen?: boolean;
  /** Where the format came from: --output, FARM_OUTPUT, the config file's path, or the default (`farm config view`). */
  source: string;
}

const isFormat = (v: string | undefined): v is OutputFormat => v !== undefined && (outputFormats as readonly string[]).includes(v);

/**
 * Takes `-o/--output json|pretty|wide` out of argv, wherever it is, and
 * picks the format before anything else is parsed, so even flag errors
 * honour it: flag > FARM_OUTPUT > config file > json unless stdout is a
 * terminal. Other values of --output stay for the command: the old
 * spelling of a file (`farm screenshot --output shot.png`), refused as a
 * format by commands that have no such file.
 */
export function takeOutputFormat(argv: readonly string[], env: NodeJS.ProcessEnv, isTty = process.stdout.isTTY === true): FormatChoice {
  const rest: string[] = [];
  let flag: OutputFormat | undefined;
  let repeated = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === "--") {
      rest.push(...argv.slice(i));
      break;
    }
    const spaced = a === "--output" || a === "-o";
    const value = spaced ? argv[i + 1] : a.startsWith("--output=") ? a.slice("--output=".length) : a.startsWith("-o") && a.length > 2 ? a.slice(2).replace(/^=/, "") : undefined;
    if (isFormat(value)) {
      // Like every single-value flag, given twice it is refused (not "last
      // wins"); the refusal is printed in the first format asked for.
      if (flag !== undefined) repeated = true;
      else flag = value;
      if (spaced) i++;
      continue;
    }
    rest.push(a);
  }
  const file = { output: configuredOutput(env) };
  const { value: v, source: from } = resolveOption(outputOption, "output", { flags: { output: flag }, env, file });
  if (v === undefined) return { format: defaultFormat(isTty), rest, repeated, source: `default (stdout is ${isTty ? "" : "not "}a terminal)` };
  const source = from === "flag" ? "--output" : from === "env" ? "FARM_OUTPUT" : configFilePath(env);
  if (isFormat(v)) return { format: v, rest, repeated, chosen: true, source };
  return { format: "json", rest, bad: v, repeated, source };
}

/** The refusal for a format choice that is not one, or given twice. */
export function formatError(choice: FormatChoice): CliError | undefined {
  if (choice.bad !== undefined) return new CliError(Errors.INVALID_ARGUMENT, `--output must be json, pretty or wide, got "${choice.bad}"`, "output");
  if (choice.repeated) return new CliError(Errors.INVALID_ARGUMENT, "--output was given more than once; give it once", "output");
  return undefined;
}
