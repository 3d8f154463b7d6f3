import { parseArgs, type ParseArgsConfig } from "node:util";
import { Errors } from "@farm/shared/errors";
import { CliError } from "./cli-error.js";

export type OptionSpec = NonNullable<ParseArgsConfig["options"]>;

export interface Parsed {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

/**
 * Strict flag parsing: an unknown or malformed flag is an INVALID_ARGUMENT,
 * and so is a single-value flag given twice (node's parseArgs would silently
 * keep the last one, so `--device A --device B` would act on B).
 */
export function parseFlags(args: string[], options: OptionSpec, allowPositionals = false): Parsed {
  let r;
  try {
    r = parseArgs({ args, options, strict: true, allowPositionals, tokens: true });
  } catch (err) {
    const message = (err as Error).message;
    const flag = /'(--?[\w-]+)/.exec(message)?.[1];
    throw new CliError(Errors.INVALID_ARGUMENT, message, flag?.replace(/^-+/, ""));
  }
  const seen = new Set<string>();
  for (const t of r.tokens) {
    if (t.kind !== "option") continue;
    const spec = options[t.name];
    if (spec?.type !== "string" || spec.multiple === true) continue;
    if (seen.has(t.name)) throw new CliError(Errors.INVALID_ARGUMENT, `--${t.name} was given more than once; give it once`, t.name);
    seen.add(t.name);
  }
  return { values: r.values as Parsed["values"], positionals: r.positionals };
}

export function stringFlag(p: Parsed, name: string): string | undefined {
  const v = p.values[name];
  return typeof v === "string" ? v : undefined;
}

export function requiredString(p: Parsed, name: string): string {
  const v = stringFlag(p, name);
  if (v === undefined || v === "") throw new CliError(Errors.INVALID_ARGUMENT, `--${name} is required`, name);
  return v;
}

/** An integer flag within [min, max]. */
export function intFlag(p: Parsed, name: string, min: number, max: number): number | undefined {
  const v = stringFlag(p, name);
  if (v === undefined) return undefined;
  if (!/^-?\d+$/.test(v)) throw new CliError(Errors.INVALID_ARGUMENT, `--${name} must be an integer, got "${v}"`, name);
  const n = Number(v);
  if (n < min || n > max) throw new CliError(Errors.INVALID_ARGUMENT, `--${name} must be within ${min}..${max}, got ${n}`, name);
  return n;
}
