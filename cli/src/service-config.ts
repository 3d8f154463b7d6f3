import { readFileSync } from "node:fs";
import { CliError } from "./cli-error.js";
import { Errors } from "@farm/shared/error-codes";

export type KeyType = "string" | "number" | "boolean";

/**
 * A service's JSON config file (--config, or an environment variable):
 * keys are the flags in camelCase. Unknown keys and wrong types are refused
 * with the key named, before the service starts. Its values take their
 * place in the precedence in options/resolve.ts.
 */
export function loadServiceConfig(path: string | undefined, keys: Readonly<Record<string, KeyType>>): Record<string, string | number | boolean> {
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

/** The resolved log level becomes FARM_LOG_LEVEL for the service's logger. */
export function applyLogLevel(level: string | undefined): void {
  if (level === undefined) return;
  if (!["debug", "info", "warn", "error"].includes(level)) throw new CliError(Errors.INVALID_ARGUMENT, `log level must be debug, info, warn or error, got "${level}"`, "log-level");
  process.env["FARM_LOG_LEVEL"] = level;
}
