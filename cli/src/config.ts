import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Errors } from "@farm/shared/errors";
import { CliError } from "./cli-error.js";
import { defaultConfigFile, defaultFarmHome, standaloneFiles } from "@farm/shared/paths";

export interface ClientConfig {
  coordinator: string;
  /** Where the coordinator URL came from, for error messages. */
  coordinatorSource: string;
  token: string | undefined;
  /** PEM bundle to verify the coordinator with, instead of the system roots. */
  caFile: string | undefined;
  /** Send the token over cleartext to a non-loopback coordinator anyway. */
  insecure: boolean;
}

export interface ConfigInputs {
  flags: { coordinator?: string | undefined; tokenFile?: string | undefined; caFile?: string | undefined; insecure?: boolean | undefined };
  env: NodeJS.ProcessEnv;
}

interface FileConfig {
  coordinator?: string;
  token?: string;
  tokenFile?: string;
  output?: string;
  caFile?: string;
  insecure?: boolean;
}

export const DEFAULT_COORDINATOR = "http://127.0.0.1:7420";

/**
 * Resolves where and as whom the CLI talks: flags > environment
 * (FARM_COORDINATOR, FARM_TOKEN, FARM_CA_FILE, FARM_INSECURE) > config file
 * > the local standalone's files > built-in defaults.
 */
export function resolveClientConfig({ flags, env }: ConfigInputs): ClientConfig {
  const configPath = configFilePath(env);
  const file = readConfigFile(configPath);
  const home = defaultFarmHome(env);
  const standalone = readStandalone(join(home, standaloneFiles.address));

  let coordinator = DEFAULT_COORDINATOR;
  let coordinatorSource = "default";
  if (flags.coordinator) [coordinator, coordinatorSource] = [flags.coordinator, "--coordinator"];
  else if (env["FARM_COORDINATOR"]) [coordinator, coordinatorSource] = [env["FARM_COORDINATOR"], "FARM_COORDINATOR"];
  else if (file.coordinator) [coordinator, coordinatorSource] = [file.coordinator, configPath];
  else if (standalone) [coordinator, coordinatorSource] = [standalone, join(home, standaloneFiles.address)];
  validateUrl(coordinator, coordinatorSource);

  let token: string | undefined;
  if (flags.tokenFile) token = readTokenFile(flags.tokenFile, "token-file");
  else if (env["FARM_TOKEN"]) token = env["FARM_TOKEN"].trim();
  else if (file.token) token = file.token;
  else if (file.tokenFile) token = readTokenFile(file.tokenFile, "tokenFile");
  else token = readOptional(join(home, standaloneFiles.adminToken));

  const caFile = flags.caFile ?? (env["FARM_CA_FILE"] || undefined) ?? file.caFile;
  const insecure = flags.insecure === true || env["FARM_INSECURE"] === "1" || file.insecure === true;
  return { coordinator, coordinatorSource, token, caFile, insecure };
}

/** The config file's "output" setting, if any (main decides the format). */
export function configuredOutput(env: NodeJS.ProcessEnv): string | undefined {
  try {
    return readConfigFile(configFilePath(env)).output;
  } catch {
    return undefined;
  }
}

function configFilePath(env: NodeJS.ProcessEnv): string {
  return env["FARM_CONFIG"] || defaultConfigFile(env);
}

function readConfigFile(path: string): FileConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return {};
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("not an object");
    return parsed as FileConfig;
  } catch (err) {
    throw new CliError(Errors.INVALID_ARGUMENT, `config file ${path} is not a JSON object: ${(err as Error).message}`, "config");
  }
}

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

export function readTokenFile(path: string, field: string): string {
  try {
    const t = readFileSync(path, "utf8").trim();
    if (t === "") throw new Error("file is empty");
    return t;
  } catch (err) {
    throw new CliError(Errors.INVALID_ARGUMENT, `cannot read token from ${path}: ${(err as Error).message}`, field);
  }
}

function readOptional(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

function validateUrl(url: string, source: string): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new CliError(Errors.INVALID_ARGUMENT, `coordinator URL "${url}" (from ${source}) is not a URL`, "coordinator");
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new CliError(Errors.INVALID_ARGUMENT, `coordinator URL must be http:// or https://, got "${url}" (from ${source})`, "coordinator");
  }
}
