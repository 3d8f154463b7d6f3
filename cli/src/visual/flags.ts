import { Errors } from "@farm/shared/error-codes";
import { CliError } from "../cli-error.js";

/**
 * Flag parsers of `farm assert visual` and `farm wait`. Light on purpose:
 * the command tree (tree/check-commands.ts) imports them at start-up, so
 * nothing here may load sharp, pixelmatch or Connect.
 */

/** A rectangle in image pixels: x, y from the top left; w, h at least 1. */
export interface MaskRect {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** `--mask x,y,w,h`: four non-negative integers, w and h at least 1. */
export function parseMask(text: string, flag = "mask"): MaskRect {
  const parts = text.split(",").map((p) => p.trim());
  const usage = `--${flag} must be x,y,w,h in pixels (four integers, w and h at least 1), got "${text}"`;
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,6}$/.test(p))) throw new CliError(Errors.INVALID_ARGUMENT, usage, flag);
  const [x, y, w, h] = parts.map(Number) as [number, number, number, number];
  if (w < 1 || h < 1) throw new CliError(Errors.INVALID_ARGUMENT, usage, flag);
  return { x, y, w, h };
}

/** `--threshold PCT`: a percentage within 0..100 (decimals allowed, a trailing % too). */
export function parseThreshold(text: string, flag = "threshold"): number {
  const m = /^\s*(\d+(?:\.\d+)?|\.\d+)\s*%?\s*$/.exec(text);
  const n = m ? Number(m[1]) : Number.NaN;
  if (!Number.isFinite(n) || n < 0 || n > 100) throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} must be a percentage within 0..100, got "${text}"`, flag);
  return n;
}

const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000 };

/**
 * A duration with its unit (250ms, 1.5s, 2m) within [min, max]
 * milliseconds. A bare number is refused: elsewhere --timeout counts
 * milliseconds, and guessing would wait a thousand times too long or short.
 */
export function unitDuration(min: number, max: number): (text: string, flag: string) => number {
  return (text, flag) => {
    const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)\s*$/.exec(text);
    if (!m) throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} must be a duration with its unit, like 1500ms, 10s or 2m, got "${text}"`, flag);
    const ms = Math.round(Number(m[1]) * (UNITS[m[2] as string] as number));
    if (ms < min || ms > max) throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} must be within ${min}ms..${max / 1000}s, got "${text}"`, flag);
    return ms;
  };
}
