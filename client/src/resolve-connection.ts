import { join } from "node:path";
import { defaultFarmHome, standaloneFiles } from "@farm/shared/paths";
import { DEFAULT_COORDINATOR, readOptional, readTokenFile, validateUrl, type ClientConfig } from "./config.js";

/** Where a setting came from, highest first: a flag (or the library's own option), the environment, the config file, a default. */
export type ValueSource = "flag" | "env" | "config" | "default";

/** The first candidate that yields a value; each is only evaluated when the ones above it gave nothing. */
export function pick<T>(candidates: readonly (readonly [ValueSource, () => T | undefined])[]): { value: T; source: ValueSource } | undefined {
  for (const [source, get] of candidates) {
    const value = get();
    if (value !== undefined) return { value, source };
  }
  return undefined;
}

/** The environment and the config file a connection is resolved from. */
export interface ConnectionLayers {
  env: NodeJS.ProcessEnv;
  /** The client config file's object. */
  file: Readonly<Record<string, unknown>>;
  /** The config file's path, for messages. */
  fileName?: string | undefined;
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
export function resolveClientConfig(values: ConnectionValues, sources: ConnectionSources, layers: ConnectionLayers): ClientConfig & { verbose: boolean } {
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
