import { CliError } from "../cli-error.js";
import { configKeys, readConfigFile, validateUrl, writeConfigFile, type ConfigFile, type ConfigKey } from "../config.js";
import { Errors } from "@farm/shared/error-codes";
import { outputFormats } from "../output.js";
import { clientSession } from "../session.js";
import type { configSetOptions, configViewOptions } from "../tree/misc-commands.js";
import type { Action } from "../tree/spec.js";

const isKey = (k: string): k is ConfigKey => Object.hasOwn(configKeys, k);

/** Shows a token as its first characters only: the view is safe to paste. */
const masked = (t: string | undefined) => (t === undefined ? undefined : `${t.slice(0, 6)}…`);

/** `farm config view`: the file's keys, and what the connection settings resolve to (and from where). */
export const viewConfig: Action<typeof configViewOptions> = async (input) => {
  const { ctx } = input;
  const file = { ...ctx.configFile };
  if (typeof file.token === "string") file.token = masked(file.token) as string;
  const session = clientSession(input);
  const effective = {
    coordinator: session.config.coordinator,
    coordinatorSource: session.config.coordinatorSource,
    token: session.config.token ? masked(session.config.token) : null,
    caFile: session.config.caFile ?? null,
    insecure: session.config.insecure,
    output: ctx.format,
  };
  ctx.printer.result({ path: ctx.configPath, file, effective }, () =>
    [
      `config file: ${ctx.configPath}${Object.keys(file).length === 0 ? " (empty or missing)" : ""}`,
      ...Object.entries(file).map(([k, v]) => `  ${k} = ${JSON.stringify(v)}`),
      "in effect (flag > environment > config file > default):",
      `  coordinator = ${effective.coordinator} (from ${effective.coordinatorSource})`,
      `  token       = ${effective.token ?? "(none)"}`,
      `  caFile      = ${effective.caFile ?? "(system roots)"}`,
      `  insecure    = ${effective.insecure}`,
      `  output      = ${effective.output}`,
    ].join("\n"));
  return 0;
};

function valueFor(key: ConfigKey, text: string): string | boolean {
  const spec = configKeys[key];
  if (spec.type === "boolean") {
    if (text === "true" || text === "1") return true;
    if (text === "false" || text === "0") return false;
    throw new CliError(Errors.INVALID_ARGUMENT, `${key} must be true or false, got "${text}"`, "value");
  }
  if (key === "coordinator") validateUrl(text, "farm config set");
  if (key === "output" && !(outputFormats as readonly string[]).includes(text)) throw new CliError(Errors.INVALID_ARGUMENT, `output must be json, pretty or wide, got "${text}"`, "value");
  return text;
}

/** `farm config set KEY VALUE` / `--unset KEY`: one key, checked, the file rewritten atomically (0600). */
export const setConfig: Action<typeof configSetOptions> = async ({ opts, args, ctx }) => {
  const [key, value] = args as [string, string | undefined];
  if (!isKey(key)) throw new CliError(Errors.INVALID_ARGUMENT, `unknown key "${key}"; known: ${Object.keys(configKeys).join(", ")}`, "key");
  if (opts.unset === (value !== undefined)) throw new CliError(Errors.INVALID_ARGUMENT, opts.unset ? "--unset takes only the KEY" : "give a VALUE, or --unset", "value");
  const file: ConfigFile = readConfigFile(ctx.configPath);
  if (opts.unset) delete file[key];
  else file[key] = valueFor(key, value as string);
  writeConfigFile(ctx.configPath, file);
  const shown = key === "token" && typeof file[key] === "string" ? masked(file[key]) : file[key];
  ctx.printer.result({ path: ctx.configPath, key, value: shown ?? null }, () => (opts.unset ? `${key} removed from ${ctx.configPath}` : `${key} = ${JSON.stringify(shown)} in ${ctx.configPath}`));
  return 0;
};
