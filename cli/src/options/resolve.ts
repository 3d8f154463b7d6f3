import { join } from "node:path";
import { defaultFarmHome, standaloneFiles } from "@farm/shared/paths";
import { CliError } from "../cli-error.js";
import { DEFAULT_COORDINATOR, readOptional, readTokenFile, validateUrl, type ClientConfig } from "../config.js";
import { Errors } from "@farm/shared/error-codes";
import { flagName, type OptionDecl, type OptionSet, type OptionValues } from "./option-decl.js";

/**
 * The one place a setting's precedence is decided:
 *
 *   flag > environment > config file > default
 *
 * Every command's declared options (option-decl.ts) are resolved here, and
 * so are the client's connection settings, whose last layers are the local
 * `farm standalone`'s files.
 */

export type ValueSource = "flag" | "env" | "config" | "default";

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

/** The first candidate that yields a value; each is only evaluated when the ones above it gave nothing. */
export function pick<T>(candidates: readonly (readonly [ValueSource, () => T | undefined])[]): { value: T; source: ValueSource } | undefined {
  for (const [source, get] of candidates) {
    const value = get();
    if (value !== undefined) return { value, source };
  }
  return undefined;
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

/** The connection options every client command declares (common-options.ts), as resolved. */
export interface ConnectionValues {
  coordinator: string | undefined;
  tokenFile: string | undefined;
  caFile: string | undefined;
  insecure: boolean;
  verbose: boolean;
}

/** Where a resolved setting came from, as messages and `farm config view` name it: the flag, the variable, the file's path, or "default". */
function sourceName(source: ValueSource | undefined, flag: string, envName: string, fileName: string | undefined): string {
  return source === "flag" ? flag : source === "env" ? envName : source === "config" ? (fileName ?? "the config file") : "default";
}

/**
 * Where and as whom a client command talks. After flag, environment and
 * config file come the local standalone's address and admin token
 * (FARM_HOME), then the built-in default. The token: --token-file >
 * FARM_TOKEN (the token itself) > the config file's token, then its
 * tokenFile > the standalone's admin token.
 */
export function resolveClientConfig(values: ConnectionValues, sources: ConnectionSources, layers: Pick<Layers, "env" | "file" | "fileName">): ClientConfig & { verbose: boolean } {
  const { env, file } = layers;
  const home = defaultFarmHome(env);
  const standaloneAddress = join(home, standaloneFiles.address);
  const coordinator = pick<{ url: string; from: string }>([
    ["flag", () => (values.coordinator ? { url: values.coordinator, from: sourceName(sources.coordinator, "--coordinator", "FARM_COORDINATOR", layers.fileName) } : undefined)],
    ["default", () => {
      const url = readStandalone(standaloneAddress);
      return url ? { url, from: standaloneAddress } : undefined;
    }],
    ["default", () => ({ url: DEFAULT_COORDINATOR, from: "default" })],
  ])!.value;
  validateUrl(coordinator.url, coordinator.from);

  const text = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
  const fileName = layers.fileName ?? "the config file";
  const adminToken = join(home, standaloneFiles.adminToken);
  // Each candidate names where its token came from; the token itself is never part of the name.
  const token = pick<{ value: string; from: string }>([
    ["flag", () => (values.tokenFile ? { value: readTokenFile(values.tokenFile, "token-file"), from: `--token-file ${values.tokenFile}` } : undefined)],
    ["env", () => withFrom(env["FARM_TOKEN"]?.trim() || undefined, "FARM_TOKEN")],
    ["config", () => withFrom(text(file["token"]), `token in ${fileName}`)],
    ["config", () => {
      const f = text(file["tokenFile"]);
      return f ? { value: readTokenFile(f, "tokenFile"), from: `tokenFile ${f} (named in ${fileName})` } : undefined;
    }],
    ["default", () => withFrom(readOptional(adminToken), adminToken)],
  ])?.value;
  // The built-in address means nothing was configured and no standalone was found: messages say where the CLI looked.
  const standaloneSearched = coordinator.from === "default" ? { path: standaloneAddress, farmHomeSet: Boolean(env["FARM_HOME"]) } : undefined;
  return {
    coordinator: coordinator.url,
    coordinatorSource: coordinator.from,
    standaloneSearched,
    token: token?.value,
    tokenSource: token?.from,
    caFile: values.caFile,
    caFileSource: sourceName(sources.caFile, "--ca-file", "FARM_CA_FILE", layers.fileName),
    insecure: values.insecure,
    insecureSource: sourceName(sources.insecure, "--insecure", "FARM_INSECURE", layers.fileName),
    verbose: values.verbose,
  };
}

/** Where the connection options came from (a command's resolved sources carry these keys). */
export interface ConnectionSources {
  coordinator?: ValueSource | undefined;
  caFile?: ValueSource | undefined;
  insecure?: ValueSource | undefined;
}

const withFrom = (value: string | undefined, from: string) => (value === undefined ? undefined : { value, from });

function readStandalone(path: string): string | undefined {
  const text = readOptional(path);
  if (!text) return undefined;
  try {
    const url = (JSON.parse(text) as { url?: unknown }).url;
    return typeof url === "string" ? url : undefined;
  } catch {
    return undefined;
  }
}
