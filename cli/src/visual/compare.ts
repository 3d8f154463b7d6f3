import { createHash } from "node:crypto";
import pixelmatch from "pixelmatch";
import sharp from "sharp";
import { Errors } from "@farm/shared/error-codes";
import { CliError } from "../cli-error.js";
import type { MaskRect } from "./flags.js";

export type { MaskRect } from "./flags.js";

/**
 * Comparing a screenshot with a baseline image (`farm assert visual`):
 * decoding, masks, the two engines and the diff image. No I/O beyond
 * sharp's in-memory work, so it is unit-tested on generated images.
 */

export type VisualEngine = "exact" | "pixelmatch";
export const VISUAL_ENGINES: readonly VisualEngine[] = ["exact", "pixelmatch"];

/** Decoded pixels: width × height × 4 bytes (RGBA, 8 bits each), rows top to bottom. */
export interface RawImage {
  width: number;
  height: number;
  data: Uint8Array;
}

export interface CompareOptions {
  engine: VisualEngine;
  /** Ignored areas: both images' pixels there count as equal. */
  masks: readonly MaskRect[];
  /** The largest share of compared pixels (percent, 0..100) that may differ and still pass. */
  thresholdPct: number;
}

export interface CompareResult {
  /** Sizes equal and diffPct ≤ thresholdPct. */
  passed: boolean;
  /** differentPixels / comparedPixels × 100 (0 when nothing is compared); 100 for a size mismatch. */
  diffPct: number;
  differentPixels: number;
  /** Pixels outside every mask. */
  comparedPixels: number;
  maskedPixels: number;
  /** The baseline's size (the actual one is in sizeMismatch when they differ). */
  width: number;
  height: number;
  /** Set when the sizes differ: nothing was compared, the check fails whatever the threshold. */
  sizeMismatch?: { baseline: { width: number; height: number }; actual: { width: number; height: number } };
  /** When pixels differ: the actual screen faded to grey, differences red, masks tinted blue. */
  diff?: RawImage;
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** True when the bytes start with the PNG signature. */
export function isPng(bytes: Uint8Array): boolean {
  return bytes.length >= PNG_SIGNATURE.length && Buffer.from(bytes.buffer, bytes.byteOffset, PNG_SIGNATURE.length).equals(PNG_SIGNATURE);
}

/**
 * A PNG decoded to RGBA. Anything else (another format, a damaged PNG) is
 * INVALID_ARGUMENT naming `field`, described as `what`.
 */
export async function decodePng(bytes: Uint8Array, what: string, field: string): Promise<RawImage> {
  if (!isPng(bytes)) throw new CliError(Errors.INVALID_ARGUMENT, `${what} is not a PNG file`, field);
  try {
    const { data, info } = await sharp(bytes, { failOn: "error" }).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
    if (info.channels !== 4) throw new Error(`decoded to ${info.channels} channels`);
    // A copy of our own: sharp's buffer may sit at any offset of a shared pool, and pixelmatch reads it as 32-bit words.
    return { width: info.width, height: info.height, data: new Uint8Array(data) };
  } catch (err) {
    throw new CliError(Errors.INVALID_ARGUMENT, `${what} is not a readable PNG: ${(err as Error).message}`, field);
  }
}

/** RGBA pixels as a PNG file's bytes. */
export async function encodePng(img: RawImage): Promise<Buffer> {
  return sharp(Buffer.from(img.data.buffer, img.data.byteOffset, img.data.byteLength), { raw: { width: img.width, height: img.height, channels: 4 } })
    .png()
    .toBuffer();
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/**
 * The masks against an image of this size: each clipped to the image; a
 * mask with nothing inside the image is refused (a mistake, not a no-op).
 */
export function clipMasks(masks: readonly MaskRect[], width: number, height: number, flag = "mask"): MaskRect[] {
  return masks.map((m) => {
    const right = Math.min(m.x + m.w, width);
    const bottom = Math.min(m.y + m.h, height);
    if (m.x >= width || m.y >= height || right <= m.x || bottom <= m.y) {
      throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} ${m.x},${m.y},${m.w},${m.h} lies outside the ${width}x${height} baseline`, flag);
    }
    return { x: m.x, y: m.y, w: right - m.x, h: bottom - m.y };
  });
}

/** One byte per pixel, 1 inside any mask; and how many pixels that is (overlaps counted once). */
export function maskBitmap(masks: readonly MaskRect[], width: number, height: number): { bitmap: Uint8Array; masked: number } {
  const bitmap = new Uint8Array(width * height);
  for (const m of masks) {
    const right = Math.min(m.x + m.w, width);
    const bottom = Math.min(m.y + m.h, height);
    for (let y = Math.max(0, m.y); y < bottom; y++) bitmap.fill(1, y * width + Math.max(0, m.x), y * width + right);
  }
  let masked = 0;
  for (const v of bitmap) masked += v;
  return { bitmap, masked };
}

/** Differences red, anti-aliasing yellow (pixelmatch), masks tinted blue, the rest the actual image faded. */
const DIFF_ALPHA = 0.1;
const MASK_TINT: readonly [number, number, number] = [70, 110, 255];

function fadedGrey(src: Uint8Array, pos: number): number {
  const luma = 0.29889531 * (src[pos] as number) + 0.58662247 * (src[pos + 1] as number) + 0.11448223 * (src[pos + 2] as number);
  const a = (src[pos + 3] as number) / 255;
  return Math.round(255 + (luma - 255) * DIFF_ALPHA * a);
}

function paintMasks(out: Uint8Array, bitmap: Uint8Array, actual: Uint8Array): void {
  for (let i = 0, pos = 0; i < bitmap.length; i++, pos += 4) {
    if (!bitmap[i]) continue;
    const g = fadedGrey(actual, pos);
    out[pos] = Math.round((g + MASK_TINT[0]) / 2);
    out[pos + 1] = Math.round((g + MASK_TINT[1]) / 2);
    out[pos + 2] = Math.round((g + MASK_TINT[2]) / 2);
    out[pos + 3] = 255;
  }
}

/** pixelmatch reads pixels as 32-bit words: a view at an odd offset (a pooled Buffer's) is copied first. */
function wordAligned(data: Uint8Array): Uint8Array {
  return data.byteOffset % 4 === 0 ? data : new Uint8Array(data);
}

/**
 * Compares `actual` with `baseline`.
 *
 * - Sizes must match; when they do not, nothing is compared and the result
 *   fails whatever the threshold (diffPct 100, sizeMismatch set, no diff image).
 * - Masked pixels (the union of the masks, clipped to the image) are left
 *   out of both counts.
 * - exact: a pixel differs when any of its RGBA bytes differs.
 * - pixelmatch: pixelmatch's defaults (colour threshold 0.1, anti-aliased
 *   pixels detected and not counted).
 * - diffPct = differentPixels / comparedPixels × 100; passed when it is at
 *   most thresholdPct (so threshold 0 means no pixel may differ).
 */
export function compareImages(baseline: RawImage, actual: RawImage, opts: CompareOptions): CompareResult {
  const { width, height } = baseline;
  if (actual.width !== width || actual.height !== height) {
    return {
      passed: false,
      diffPct: 100,
      differentPixels: 0,
      comparedPixels: 0,
      maskedPixels: 0,
      width,
      height,
      sizeMismatch: { baseline: { width, height }, actual: { width: actual.width, height: actual.height } },
    };
  }
  const total = width * height;
  const { bitmap, masked } = maskBitmap(clipMasks(opts.masks, width, height), width, height);
  const compared = total - masked;
  const out = new Uint8Array(total * 4);
  let different = 0;
  if (opts.engine === "pixelmatch") {
    different = pixelmatch(wordAligned(baseline.data), wordAligned(actual.data), out, width, height, { ignoreMask: bitmap, alpha: DIFF_ALPHA });
    // pixelmatch fades the first image; the diff shows the actual screen.
    for (let i = 0, pos = 0; i < total; i++, pos += 4) {
      if (out[pos] === out[pos + 1] && out[pos + 1] === out[pos + 2]) {
        const g = fadedGrey(actual.data, pos);
        out[pos] = g;
        out[pos + 1] = g;
        out[pos + 2] = g;
      }
    }
  } else {
    const a = baseline.data;
    const b = actual.data;
    for (let i = 0, pos = 0; i < total; i++, pos += 4) {
      if (!bitmap[i] && (a[pos] !== b[pos] || a[pos + 1] !== b[pos + 1] || a[pos + 2] !== b[pos + 2] || a[pos + 3] !== b[pos + 3])) {
        different++;
        out[pos] = 255;
        out[pos + 1] = 0;
        out[pos + 2] = 0;
      } else {
        const g = fadedGrey(b, pos);
        out[pos] = g;
        out[pos + 1] = g;
        out[pos + 2] = g;
      }
      out[pos + 3] = 255;
    }
  }
  paintMasks(out, bitmap, actual.data);
  const diffPct = compared === 0 ? 0 : (different / compared) * 100;
  return {
    passed: diffPct <= opts.thresholdPct,
    diffPct,
    differentPixels: different,
    comparedPixels: compared,
    maskedPixels: masked,
    width,
    height,
    ...(different > 0 ? { diff: { width, height, data: out } } : {}),
  };
}

/** diffPct as people read it: up to 4 decimals, no trailing zeros ("0.0123%"). */
export function pctText(pct: number): string {
  return `${Number(pct.toFixed(4))}%`;
}
