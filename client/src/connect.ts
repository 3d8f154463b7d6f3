import { Errors } from "@farm/shared/error-codes";
import { configFilePath, readConfigFile, type ClientConfig } from "./config.js";
import { FarmError } from "./farm-error.js";
import { pick, resolveClientConfig, type ValueSource } from "./resolve-connection.js";

/** Where and as whom to connect; anything left out is resolved as the `farm` CLI resolves it. */
export interface ConnectOptions {
  /** Coordinator URL; else FARM_COORDINATOR, the config file's coordinator, the local standalone, http://127.0.0.1:7420. */
  coordinator?: string | undefined;
  /** A user token; else tokenFile, FARM_TOKEN, the config file's token or tokenFile, the local standalone's admin token. */
  token?: string | undefined;
  /** A file holding the token (as the CLI's --token-file). */
  tokenFile?: string | undefined;
  /** PEM CA bundle to verify the coordinator with; else FARM_CA_FILE, the config file's caFile. */
  caFile?: string | undefined;
  /** Allow the token over cleartext to a non-loopback coordinator; else FARM_INSECURE, the config file's insecure. */
  insecure?: boolean | undefined;
  /** The environment read (default process.env): FARM_COORDINATOR, FARM_TOKEN, FARM_CA_FILE, FARM_INSECURE, FARM_CONFIG, FARM_HOME. */
  env?: NodeJS.ProcessEnv | undefined;
  /** The client config file; else FARM_CONFIG, else ~/.config/farm/config.json. */
  configFile?: string | undefined;
}

/** A setting: the option, else the environment variable, else the config file's key (as the CLI's flag > env > file). */
function setting<T>(option: T | undefined, envText: string | undefined, fileValue: unknown, parse: (text: string) => T, fromFile: (v: unknown) => T): { value: T; source: ValueSource } | undefined {
  return pick<T>([
    ["flag", () => option],
    ["env", () => (envText === undefined || envText === "" ? undefined : parse(envText))],
    ["config", () => (fileValue === undefined ? undefined : fromFile(fileValue))],
  ]);
}

/**
 * The connection settings as the `farm` CLI resolves them (flag > env >
 * config file > local standalone > default; resolve-connection.ts is the
 * CLI's own code), an option of the library standing where a flag does.
 * Bad settings fail here, naming the setting, before anything is dialled.
 */
export function resolveConnection(opts: ConnectOptions = {}): ClientConfig {
  const env = opts.env ?? process.env;
  const fileName = opts.configFile ?? configFilePath(env);
  const file = readConfigFile(fileName);
  const text = (key: string) => (v: unknown): string => {
    if (typeof v === "string" || typeof v === "number") return String(v);
    throw new FarmError(Errors.INVALID_ARGUMENT, `"${key}" in ${fileName} has the wrong type`, key);
  };
  const bool = (v: unknown): boolean => {
    if (typeof v === "boolean") return v;
    throw new FarmError(Errors.INVALID_ARGUMENT, `"insecure" in ${fileName} has the wrong type`, "insecure");
  };
  const coordinator = setting(opts.coordinator, env["FARM_COORDINATOR"], file["coordinator"], (t) => t, text("coordinator"));
  const caFile = setting(opts.caFile, env["FARM_CA_FILE"], file["caFile"], (t) => t, text("caFile"));
  const insecure = setting(opts.insecure, env["FARM_INSECURE"], file["insecure"], (t) => t === "1" || t === "true", bool);
  const config = resolveClientConfig(
    { coordinator: coordinator?.value, tokenFile: opts.tokenFile, caFile: caFile?.value, insecure: insecure?.value ?? false, verbose: false },
    { coordinator: coordinator?.source, caFile: caFile?.source, insecure: insecure?.source ?? "default" },
    { env, file, fileName },
  );
  if (opts.token !== undefined) {
    if (opts.token.trim() === "") throw new FarmError(Errors.INVALID_ARGUMENT, "token is empty", "token");
    return { ...config, token: opts.token.trim(), tokenSource: "the token option" };
  }
  return config;
}
