import sharp from "sharp";

export const PNG_MAX_BYTES = 64 * 1024 * 1024;
export const PNG_MAX_PIXELS = 32_000_000;

const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Why a screenshot is refused: an artifact error in a manifest, an RPC error for a routed screenshot. */
export type PngProblem = "SCREENSHOT_EMPTY" | "SCREENSHOT_NOT_PNG" | "SCREENSHOT_INVALID_PNG" | "SCREENSHOT_TOO_LARGE";

export type PngCheck = { ok: true; width: number; height: number } | { ok: false; code: PngProblem; message: string };

/**
 * A screenshot is complete only if it decodes: a PNG signature, a header with
 * positive dimensions within the pixel limit, and pixel data that decodes in
 * full to exactly those dimensions. Truncated or corrupt data fails; so does
 * a header that lies about the size.
 */
export async function checkPng(bytes: Buffer): Promise<PngCheck> {
  if (bytes.length === 0) return { ok: false, code: "SCREENSHOT_EMPTY", message: "the screenshot is empty" };
  if (bytes.length < 8 || !bytes.subarray(0, 8).equals(signature)) {
    return { ok: false, code: "SCREENSHOT_NOT_PNG", message: "the screenshot does not start with a PNG signature" };
  }
  if (bytes.length < 24) return { ok: false, code: "SCREENSHOT_INVALID_PNG", message: "the PNG is too short for a header" };
  // IHDR is the first chunk; read the declared size before letting a decoder allocate.
  const width = bytes.readUInt32BE(16);
  const height = bytes.readUInt32BE(20);
  if (width === 0 || height === 0) return { ok: false, code: "SCREENSHOT_INVALID_PNG", message: `the PNG header declares ${width}x${height}` };
  if (width * height > PNG_MAX_PIXELS) {
    return { ok: false, code: "SCREENSHOT_TOO_LARGE", message: `the PNG declares ${width}x${height}, over the ${PNG_MAX_PIXELS}-pixel decoding limit` };
  }
  try {
    const { info } = await sharp(bytes, { limitInputPixels: PNG_MAX_PIXELS, failOn: "warning" }).raw().toBuffer({ resolveWithObject: true });
    if (info.width !== width || info.height !== height) {
      return { ok: false, code: "SCREENSHOT_INVALID_PNG", message: `the PNG header says ${width}x${height} but it decodes to ${info.width}x${info.height}` };
    }
    return { ok: true, width, height };
  } catch (err) {
    return { ok: false, code: "SCREENSHOT_INVALID_PNG", message: `the PNG does not decode: ${(err as Error).message}` };
  }
}
