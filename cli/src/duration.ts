import { Errors } from "@farm/shared/error-codes";
import { CliError } from "./cli-error.js";

const units: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** "1500ms", "30s", "5m", "1h", or a bare number of seconds. */
export function parseDuration(text: string, field: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!m) throw new CliError(Errors.INVALID_ARGUMENT, `--${field} must be a duration like 30s, 5m or 1h, got "${text}"`, field);
  return Math.round(Number(m[1]) * (units[m[2] ?? "s"] as number));
}
