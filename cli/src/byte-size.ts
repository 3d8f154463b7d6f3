import { Errors } from "@farm/shared/error-codes";
import { CliError } from "./cli-error.js";

const units: Record<string, number> = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** A size in bytes: `1048576`, `512K`, `100M`, `10G`, `1T` (binary units, optional "iB"/"B"). */
export function parseByteSize(text: string, field: string): number {
  const m = /^(\d+)\s*([kmgt]?)(?:i?b)?$/i.exec(text.trim());
  const n = m ? Number(m[1]) * (units[(m[2] ?? "").toLowerCase()] ?? 1) : NaN;
  if (!Number.isSafeInteger(n) || n <= 0) throw new CliError(Errors.INVALID_ARGUMENT, `${field} must be a positive size such as 500M or 10G, got "${text}"`, field);
  return n;
}
