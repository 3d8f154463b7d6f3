import { CliError } from "../cli-error.js";
import { Errors } from "@farm/shared/error-codes";

/** `33` or `33..34` (max 0: no upper bound). */
export function parseApiLevel(text: string, flag: string): { min: number; max: number } {
  const m = /^(\d+)(?:\.\.(\d+)?)?$/.exec(text);
  if (!m) throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} must be MIN or MIN..MAX, got "${text}"`, flag);
  return { min: Number(m[1]), max: m[2] ? Number(m[2]) : 0 };
}
