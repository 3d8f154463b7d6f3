import { readFileSync } from "node:fs";
import { Errors } from "@farm/shared/errors";
import { CliError } from "./cli-error.js";
import type { Parsed } from "./args.js";

export type KeyType = "string" | "number" | "boolean";

/**
 * A service's JSON config file (--config, or an environment variable):
 * keys are the flags in camelCase. Unknown keys and wrong types are refused
 * with the key named, before the service starts.
 */
export function loadServiceConfig(path: string | undefined, keys: Record<string, KeyType>): Record<string, string | number | boolean> {
  if (!path) return {};
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new CliError(Errors.INVALID_ARGUMENT, `cannot read config file ${path}: ${(err as Error).message}`, "config");
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new CliError(Errors.INVALID_ARGUMENT, `config file ${path} must hold a JSON object`, "config");
  const out: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(value)) {
    const type = keys[k];
    if (!type) throw new CliError(Errors.INVALID_ARGUMENT, `unknown key "${k}" in ${path}; known: ${Object.keys(keys).join(", ")}`, k);
    if (typeof v !== type) throw new CliError(Errors.INVALID_ARGUMENT, `"${k}" in ${path} must be a ${type}`, k);
    out[k] = v as string | number | boolean;
  }
  return out;
}

/** Flag > environment > config file, as text (flags and environment are text). */
export function setting(parsed: Parsed, flag: string, env: string | undefined, file: string | number | boolean | undefined): string | undefined {
  const v = parsed.values[flag];
  if (typeof v === "string") return v;
  if (env !== undefined && env !== "") return env;
  return file === undefined ? undefined : String(file);
}

/** A boolean flag, else the config file's value, else false. */
export function flagOrFile(parsed: Parsed, flag: string, file: string | number | boolean | undefined): boolean {
  return parsed.values[flag] === true || file === true;
}

/** --log-level or the file's logLevel becomes FARM_LOG_LEVEL (flag > environment > file). */
export function applyLogLevel(parsed: Parsed, env: NodeJS.ProcessEnv, file: string | number | boolean | undefined): void {
  const level = setting(parsed, "log-level", env["FARM_LOG_LEVEL"], file);
  if (level === undefined) return;
  if (!["debug", "info", "warn", "error"].includes(level)) throw new CliError(Errors.INVALID_ARGUMENT, `log level must be debug, info, warn or error, got "${level}"`, "log-level");
  process.env["FARM_LOG_LEVEL"] = level;
}

/** An integer setting (from a flag, the environment or the file), range-checked with the flag named. */
export function intSetting(text: string | undefined, field: string, min: number, max: number): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max) throw new CliError(Errors.INVALID_ARGUMENT, `${field} must be an integer ${min}..${max}, got "${text}"`, field);
  return n;
}
