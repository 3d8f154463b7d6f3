import { CliError } from "../cli-error.js";
import { configKeys, readConfigFile, validateUrl, writeConfigFile, type ConfigFile, type ConfigKey } from "@farm/client/config";
import { Errors } from "@farm/shared/error-codes";
import { outputFormats } from "../output.js";
import { clientSession } from "../session.js";
import type { configSetOptions, configViewOptions } from "../tree/misc-commands.js";
import type { Action } from "../tree/spec.js";

const isKey = (k: string): k is ConfigKey => Object.hasOwn(configKeys, k);

/** A token is shown only as set: none of its characters, so what is printed is safe to paste. */
const masked = (t: string | undefined) => (t === undefined ? undefined : "(set)");

/** `farm config view`: the file's keys, and what the connection settings resolve to and where each came from (a token only as set or not). */
export const viewConfig: Action<typeof configViewOptions> = async (input) => {
  const { ctx } = input;
  const file = { ...ctx.configFile };
  if (typeof file.token === "string") file.token = masked(file.token) as string;
  const { config } = clientSession(input);
  const effective = {
    coordinator: config.coordinator,
    coordinatorSource: config.coordinatorSource,
    token: config.token ? "set" : null,
    caFile: config.caFile ?? null,
    insecure: config.insecure,
    output: ctx.format,
  };
  const sources = {
    coordinator: config.coordinatorSource,
    token: config.tokenSource ?? null,
    caFile: config.caFileSource ?? "default",
    insecure: config.insecureSource ?? "default",
    output: ctx.formatSource ?? "default",
  };
  const rows: [string, string, string][] = [
    ["coordinator", effective.coordinator, sources.coordinator],
    ["token", effective.token ?? "(none)", sources.token ?? "-"],
    ["caFile", effective.caFile ?? "(system roots)", sources.caFile],
    ["insecure", String(effective.insecure), sources.insecure],
    ["output", effective.output, sources.output],
  ];
  const widths = [0, 1].map((i) => Math.max(...rows.map((r) => r[i]!.length), i === 0 ? "SETTING".length : "VALUE".length));
  const row = (r: readonly string[]) => `  ${r[0]!.padEnd(widths[0]!)}  ${r[1]!.padEnd(widths[1]!)}  ${r[2]}`;
  ctx.printer.result({ path: ctx.configPath, file, effective, sources }, () =>
    [
      `config file: ${ctx.configPath}${Object.keys(file).length === 0 ? " (empty or missing)" : ""}`,
      ...Object.entries(file).map(([k, v]) => `  ${k} = ${JSON.stringify(v)}`),
      "in effect (flag > environment > config file > local standalone > default):",
      row(["SETTING", "VALUE", "FROM"]),
      ...rows.map(row),
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
