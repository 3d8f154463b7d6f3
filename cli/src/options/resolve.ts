import { CliError } from "../cli-error.js";
import { pick, type ValueSource } from "@farm/client/resolve-connection";
import { Errors } from "@farm/shared/error-codes";
import { flagName, type OptionDecl, type OptionSet, type OptionValues } from "./option-decl.js";

/**
 * The one place a setting's precedence is decided:
 *
 *   flag > environment > config file > default
 *
 * Every command's declared options (option-decl.ts) are resolved here, and
 * so are the client's connection settings, whose last layers are the local
 * `farm standalone`'s files (@farm/client/resolve-connection, shared
 * with the client library's connect()).
 */

// The precedence helper and the connection settings live in the client library; the CLI's tests and commands import them from here too.
export { pick, resolveClientConfig, type ConnectionSources, type ConnectionValues, type ValueSource } from "@farm/client/resolve-connection";

/** What a setting can come from, highest first. */
export interface Layers {
  /** What the command line gave, by option key: text, every text of a list, or true for a switch. */
  flags: Readonly<Record<string, string | readonly string[] | true | undefined>>;
  env: NodeJS.ProcessEnv;
  /** The config file's object: the client's, or a service's --config file. */
  file: Readonly<Record<string, unknown>>;
  /** The config file's path, for messages. */
  fileName?: string;
}

export interface Resolved<O extends OptionSet> {
  values: OptionValues<O>;
  /** Where each value came from; absent when nothing set it. */
  sources: { [K in keyof O]?: ValueSource };
}

/** One declared option through the layers. */
export function resolveOption<T>(decl: OptionDecl<T>, key: string, layers: Layers): { value: T | undefined; source: ValueSource | undefined } {
  const name = flagName(decl);
  const given = layers.flags[key];
  const envText = decl.env ? layers.env[decl.env] : undefined;
  const fileValue = decl.config ? layers.file[decl.config] : undefined;
  const found = pick<T>([
    ["flag", () => (given === undefined ? undefined : fromFlag(decl, given, name))],
    ["env", () => (envText === undefined || envText === "" ? undefined : decl.parse(envText, name))],
    ["config", () => (fileValue === undefined ? undefined : fromFile(decl, fileValue, name, layers.fileName))],
    ["default", () => decl.default],
  ]);
  if (found === undefined && decl.required) {
    throw new CliError(Errors.INVALID_ARGUMENT, `--${name} is required${decl.env ? ` (or ${decl.env})` : ""}`, name);
  }
  return { value: found?.value, source: found?.source };
}

/** Every declared option of a command. */
export function resolveOptions<O extends OptionSet>(decls: O, layers: Layers): Resolved<O> {
  const values: Record<string, unknown> = {};
  const sources: Record<string, ValueSource | undefined> = {};
  for (const [key, decl] of Object.entries(decls)) {
    const r = resolveOption(decl, key, layers);
    values[key] = r.value;
    if (r.source) sources[key] = r.source;
  }
  return { values: values as OptionValues<O>, sources: sources as Resolved<O>["sources"] };
}

function fromFlag<T>(decl: OptionDecl<T>, given: string | readonly string[] | true, name: string): T {
  if (decl.kind === "flag") return true as T;
  if (decl.kind === "list") return (typeof given === "string" ? [given] : Array.isArray(given) ? given : []).map((t) => decl.parse(t, name)) as T;
  if (typeof given !== "string") throw new CliError(Errors.INVALID_ARGUMENT, `--${name} takes a value`, name);
  return decl.parse(given, name);
}

function fromFile<T>(decl: OptionDecl<T>, value: unknown, name: string, fileName = "the config file"): T | undefined {
  const custom = decl.fromConfig?.(value, name);
  if (custom !== undefined) return custom;
  if (decl.kind === "flag" && typeof value === "boolean") return value as T;
  if (decl.kind === "list" && Array.isArray(value) && value.every((v) => typeof v === "string")) return value.map((v: string) => decl.parse(v, name)) as T;
  if (decl.kind === "value" && (typeof value === "string" || typeof value === "number")) return decl.parse(String(value), name);
  throw new CliError(Errors.INVALID_ARGUMENT, `"${decl.config}" in ${fileName} has the wrong type for --${name}`, name);
}
