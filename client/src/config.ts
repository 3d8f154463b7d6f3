import { randomBytes } from "node:crypto";
import type { Connections } from "./connections.js";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { FarmError } from "./farm-error.js";
import { Errors } from "@farm/shared/error-codes";
import { defaultConfigFile } from "@farm/shared/paths";

/** Where and as whom a client command talks, once resolved (options/resolve.ts). */
export interface ClientConfig {
  coordinator: string;
  /** Where the coordinator URL came from, for error messages. */
  coordinatorSource: string;
  /** Set when nothing named a coordinator and no standalone was found: the address file looked for. */
  standaloneSearched?: { path: string; farmHomeSet: boolean } | undefined;
  token: string | undefined;
  /** Where the token came from (a flag, variable or file by name; never the token), for `farm config view`. */
  tokenSource?: string | undefined;
  /** PEM bundle to verify the coordinator with, instead of the system roots. */
  caFile: string | undefined;
  caFileSource?: string | undefined;
  /** Send the token over cleartext to a non-loopback coordinator anyway. */
  insecure: boolean;
  insecureSource?: string | undefined;
  /** The run's connections: transports made with this config register there, to be closed when the run ends. */
  connections?: Connections | undefined;
  /** Where the run's diagnostics go (stderr, or main's sink when run in process). */
  writeErr?: ((text: string) => void) | undefined;
  /** SIGINT/SIGTERM: every call made with this config is cancelled when it fires (the coordinator sees the stream reset). */
  stopSignal?: AbortSignal | undefined;
}

export const DEFAULT_COORDINATOR = "http://127.0.0.1:7420";

/** The client config file's keys and what each holds; `farm config set` refuses others. */
export const configKeys = {
  coordinator: { type: "string", description: "coordinator URL (http:// or https://)" },
  token: { type: "string", description: "a user token (farmu_…); prefer tokenFile" },
  tokenFile: { type: "string", description: "file holding a user token" },
  caFile: { type: "string", description: "PEM CA bundle to verify the coordinator with" },
  insecure: { type: "boolean", description: "allow a token over cleartext to a non-loopback coordinator" },
  output: { type: "string", description: "output format: json, pretty or wide" },
} as const;

export type ConfigKey = keyof typeof configKeys;

export type ConfigFile = Partial<Record<ConfigKey, string | boolean>> & Record<string, unknown>;

/** FARM_CONFIG, else ~/.config/farm/config.json. */
export function configFilePath(env: NodeJS.ProcessEnv): string {
  return env["FARM_CONFIG"] || defaultConfigFile(env);
}

/** The config file's object; a missing file is an empty one, a malformed one an error. */
export function readConfigFile(path: string): ConfigFile {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return {};
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("not an object");
    return parsed as ConfigFile;
  } catch (err) {
    throw new FarmError(Errors.INVALID_ARGUMENT, `config file ${path} is not a JSON object: ${(err as Error).message}`, "config");
  }
}

/** Replaces the config file atomically, private to its owner (it may hold a token). */
export function writeConfigFile(path: string, config: ConfigFile): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  writeFileSync(tmp, JSON.stringify(config, null, 2) + "\n", { mode: 0o600 });
  renameSync(tmp, path);
}

/** The config file's "output" setting, if any (start-up decides the format before parsing). */
export function configuredOutput(env: NodeJS.ProcessEnv): string | undefined {
  try {
    const v = readConfigFile(configFilePath(env)).output;
    return typeof v === "string" ? v : undefined;
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
    throw new FarmError(Errors.INVALID_ARGUMENT, `cannot read token from ${path}: ${(err as Error).message}`, field);
  }
}

export function readOptional(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

export function validateUrl(url: string, source: string): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new FarmError(Errors.INVALID_ARGUMENT, `coordinator URL "${url}" (from ${source}) is not a URL`, "coordinator");
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new FarmError(Errors.INVALID_ARGUMENT, `coordinator URL must be http:// or https://, got "${url}" (from ${source})`, "coordinator");
  }
}
