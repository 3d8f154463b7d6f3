import { CliError } from "../cli-error.js";
import { Errors } from "@farm/shared/error-codes";
import { parseDuration } from "../duration.js";

/** An integer within [min, max], named by its flag when refused. */
export function intIn(min: number, max: number): (text: string, flag: string) => number {
  return (text, flag) => {
    if (!/^-?\d+$/.test(text.trim())) throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} must be an integer, got "${text}"`, flag);
    const n = Number(text);
    if (n < min || n > max) throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} must be within ${min}..${max}, got ${n}`, flag);
    return n;
  };
}

/** One of a fixed set of words. */
export function oneOf<const W extends string>(words: readonly W[]): (text: string, flag: string) => W {
  return (text, flag) => {
    if ((words as readonly string[]).includes(text)) return text as W;
    throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} must be ${words.slice(0, -1).join(", ")} or ${words.at(-1)}, got "${text}"`, flag);
  };
}

/** A duration in milliseconds: 1500ms, 30s, 5m, 1h, or bare seconds. */
export function duration(text: string, flag: string): number {
  return parseDuration(text, flag);
}

/** Milliseconds as the shortest exact unit: 24h, 90s, 1500ms. */
function durationText(ms: number): string {
  if (ms === 0) return "0";
  for (const [unit, size] of [["h", 3_600_000], ["m", 60_000], ["s", 1_000]] as const) if (ms !== 0 && ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

/**
 * A duration within [min, max] milliseconds, refused by range with its flag
 * named: one the coordinator takes as a uint32 must fit it, and its own
 * limits are better said here than as a server's refusal (or an encoder's).
 */
export function durationIn(min: number, max: number): (text: string, flag: string) => number {
  return (text, flag) => {
    const ms = parseDuration(text, flag);
    if (ms < min || ms > max) throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} must be within ${durationText(min)}..${durationText(max)}, got ${text}`, flag);
    return ms;
  };
}
