import sharp from "sharp";
import { describe, expect, it } from "vitest";
import { CliError } from "../cli-error.js";
import { clipMasks, compareImages, decodePng, encodePng, isPng, maskBitmap, pctText, type RawImage } from "./compare.js";
import { parseMask, parseThreshold, unitDuration } from "./flags.js";
import { cliRefusal as refusal } from "../testing/cli-refusal.js";

/** A PNG of one colour with rectangles painted on it, made by sharp. */
async function png(width: number, height: number, background: [number, number, number], rects: { x: number; y: number; w: number; h: number; rgb: [number, number, number] }[] = []): Promise<Buffer> {
  const [r, g, b] = background;
  return sharp({ create: { width, height, channels: 4, background: { r, g, b, alpha: 1 } } })
    .composite(
      rects.map((q) => ({
        input: { create: { width: q.w, height: q.h, channels: 4 as const, background: { r: q.rgb[0], g: q.rgb[1], b: q.rgb[2], alpha: 1 } } },
        left: q.x,
        top: q.y,
      })),
    )
    .png()
    .toBuffer();
}

const decode = (bytes: Buffer) => decodePng(bytes, "test image", "baseline");

async function rejection(p: Promise<unknown>): Promise<CliError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(CliError);
    return err as CliError;
  }
  throw new Error("expected a refusal");
}

const WHITE: [number, number, number] = [255, 255, 255];

describe("compareImages, exact", () => {
  it("finds identical images equal: diffPct 0, no diff image", async () => {
    const a = await decode(await png(40, 30, WHITE, [{ x: 5, y: 5, w: 10, h: 10, rgb: [0, 128, 255] }]));
    const b = await decode(await png(40, 30, WHITE, [{ x: 5, y: 5, w: 10, h: 10, rgb: [0, 128, 255] }]));
    const r = compareImages(a, b, { engine: "exact", masks: [], thresholdPct: 0 });
    expect(r).toMatchObject({ passed: true, diffPct: 0, differentPixels: 0, comparedPixels: 1200, maskedPixels: 0, width: 40, height: 30 });
    expect(r.diff).toBeUndefined();
  });

  it("counts every pixel whose RGBA differs, even by one level, and draws them red", async () => {
    const a = await decode(await png(20, 10, WHITE));
    const b = await decode(await png(20, 10, WHITE, [{ x: 0, y: 0, w: 5, h: 2, rgb: [254, 255, 255] }]));
    const r = compareImages(a, b, { engine: "exact", masks: [], thresholdPct: 0 });
    expect(r).toMatchObject({ passed: false, differentPixels: 10, comparedPixels: 200, diffPct: 5 });
    const diff = r.diff as RawImage;
    expect([...diff.data.subarray(0, 4)]).toEqual([255, 0, 0, 255]);
    // Outside the difference: the actual image faded (white stays white).
    const last = (diff.width * diff.height - 1) * 4;
    expect([...diff.data.subarray(last, last + 4)]).toEqual([255, 255, 255, 255]);
    // The diff encodes to a PNG of the same size.
    const meta = await sharp(await encodePng(diff)).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(["png", 20, 10]);
  });

  it("passes when diffPct is at most the threshold, fails above it", async () => {
    const a = await decode(await png(10, 10, WHITE));
    const b = await decode(await png(10, 10, WHITE, [{ x: 0, y: 0, w: 1, h: 1, rgb: [0, 0, 0] }]));
    expect(compareImages(a, b, { engine: "exact", masks: [], thresholdPct: 1 })).toMatchObject({ passed: true, diffPct: 1 });
    expect(compareImages(a, b, { engine: "exact", masks: [], thresholdPct: 0.99 })).toMatchObject({ passed: false, diffPct: 1 });
    expect(compareImages(a, b, { engine: "exact", masks: [], thresholdPct: 0 }).passed).toBe(false);
  });
});

describe("compareImages, masks", () => {
  it("ignores masked pixels in both images and leaves them out of the compared count", async () => {
    const a = await decode(await png(100, 50, WHITE, [{ x: 10, y: 10, w: 20, h: 10, rgb: [255, 0, 0] }]));
    const b = await decode(await png(100, 50, WHITE, [{ x: 10, y: 10, w: 20, h: 10, rgb: [0, 0, 255] }, { x: 90, y: 40, w: 2, h: 2, rgb: [0, 0, 0] }]));
    const whole = compareImages(a, b, { engine: "exact", masks: [{ x: 10, y: 10, w: 20, h: 10 }], thresholdPct: 0 });
    expect(whole).toMatchObject({ passed: false, differentPixels: 4, maskedPixels: 200, comparedPixels: 4800 });
    expect(whole.diffPct).toBeCloseTo((4 / 4800) * 100, 10);
    // Masks may overlap: a pixel counts once.
    const both = compareImages(a, b, { engine: "exact", masks: [{ x: 10, y: 10, w: 20, h: 10 }, { x: 0, y: 0, w: 15, h: 15 }, { x: 88, y: 38, w: 12, h: 12 }], thresholdPct: 0 });
    expect(both).toMatchObject({ passed: true, diffPct: 0, differentPixels: 0 });
    expect(both.maskedPixels).toBe(maskBitmap([{ x: 10, y: 10, w: 20, h: 10 }, { x: 0, y: 0, w: 15, h: 15 }, { x: 88, y: 38, w: 12, h: 12 }], 100, 50).masked);
    expect(both.maskedPixels).toBe(200 + 225 - 25 + 144);
  });

  it("paints masks blue-ish in the diff image", async () => {
    const a = await decode(await png(10, 10, WHITE));
    const b = await decode(await png(10, 10, WHITE, [{ x: 9, y: 9, w: 1, h: 1, rgb: [0, 0, 0] }]));
    const r = compareImages(a, b, { engine: "exact", masks: [{ x: 0, y: 0, w: 2, h: 2 }], thresholdPct: 0 });
    const px = [...(r.diff as RawImage).data.subarray(0, 4)];
    expect(px[2]).toBeGreaterThan(px[0] as number);
  });

  it("clips masks to the image and refuses one entirely outside it", () => {
    expect(clipMasks([{ x: 90, y: 0, w: 50, h: 10 }], 100, 50)).toEqual([{ x: 90, y: 0, w: 10, h: 10 }]);
    expect(refusal(() => clipMasks([{ x: 100, y: 0, w: 5, h: 5 }], 100, 50))).toMatchObject({ code: "INVALID_ARGUMENT", field: "mask" });
  });

  it("a fully masked screen compares nothing and passes", async () => {
    const a = await decode(await png(10, 10, WHITE));
    const b = await decode(await png(10, 10, [0, 0, 0]));
    expect(compareImages(a, b, { engine: "exact", masks: [{ x: 0, y: 0, w: 10, h: 10 }], thresholdPct: 0 })).toMatchObject({ passed: true, diffPct: 0, comparedPixels: 0 });
  });
});

describe("compareImages, pixelmatch", () => {
  it("does not count a colour change below its perceptual threshold, which exact does", async () => {
    const a = await decode(await png(30, 30, [200, 200, 200]));
    const b = await decode(await png(30, 30, [200, 200, 200], [{ x: 5, y: 5, w: 20, h: 20, rgb: [203, 200, 200] }]));
    expect(compareImages(a, b, { engine: "exact", masks: [], thresholdPct: 0 })).toMatchObject({ passed: false, differentPixels: 400 });
    expect(compareImages(a, b, { engine: "pixelmatch", masks: [], thresholdPct: 0 })).toMatchObject({ passed: true, differentPixels: 0 });
  });

  it("counts a real change, honours masks, and draws the difference red", async () => {
    const a = await decode(await png(40, 40, WHITE));
    const b = await decode(await png(40, 40, WHITE, [{ x: 10, y: 10, w: 10, h: 10, rgb: [0, 0, 0] }]));
    const r = compareImages(a, b, { engine: "pixelmatch", masks: [], thresholdPct: 0 });
    expect(r.passed).toBe(false);
    // A solid square: its inside is a real difference; pixelmatch may take a few edge pixels for anti-aliasing.
    expect(r.differentPixels).toBeGreaterThanOrEqual(64);
    expect(r.differentPixels).toBeLessThanOrEqual(100);
    const centre = (15 * 40 + 15) * 4;
    expect([...(r.diff as RawImage).data.subarray(centre, centre + 3)]).toEqual([255, 0, 0]);
    expect(compareImages(a, b, { engine: "pixelmatch", masks: [{ x: 10, y: 10, w: 10, h: 10 }], thresholdPct: 0 })).toMatchObject({ passed: true, differentPixels: 0, maskedPixels: 100 });
  });

  it("works on images whose decoded buffers do not start at a word boundary", async () => {
    const a = await decode(await png(7, 3, WHITE));
    const shifted = new Uint8Array(a.data.length + 1).subarray(1);
    shifted.set(a.data);
    expect(shifted.byteOffset % 4).not.toBe(0);
    expect(compareImages(a, { ...a, data: shifted }, { engine: "pixelmatch", masks: [], thresholdPct: 0 }).passed).toBe(true);
  });
});

describe("compareImages, sizes", () => {
  it("never passes images of different sizes, whatever the threshold: diffPct 100, sizeMismatch, no diff", async () => {
    const a = await decode(await png(40, 30, WHITE));
    const b = await decode(await png(30, 40, WHITE));
    const r = compareImages(a, b, { engine: "exact", masks: [], thresholdPct: 100 });
    expect(r).toMatchObject({ passed: false, diffPct: 100, sizeMismatch: { baseline: { width: 40, height: 30 }, actual: { width: 30, height: 40 } } });
    expect(r.diff).toBeUndefined();
  });
});

describe("decodePng", () => {
  it("refuses other formats and damaged PNGs as INVALID_ARGUMENT naming the field", async () => {
    const jpeg = await sharp({ create: { width: 4, height: 4, channels: 3, background: "#fff" } }).jpeg().toBuffer();
    expect(isPng(jpeg)).toBe(false);
    expect(await rejection(decode(jpeg))).toMatchObject({ code: "INVALID_ARGUMENT", field: "baseline" });
    const good = await png(8, 8, WHITE);
    expect(isPng(good)).toBe(true);
    const cut = good.subarray(0, 30);
    expect((await rejection(decode(cut))).message).toMatch(/not a readable PNG/);
  });

  it("gives RGBA for opaque RGB and grey PNGs", async () => {
    const rgb = await sharp({ create: { width: 3, height: 2, channels: 3, background: { r: 10, g: 20, b: 30 } } }).png().toBuffer();
    const img = await decode(rgb);
    expect([img.width, img.height, img.data.length]).toEqual([3, 2, 24]);
    expect([...img.data.subarray(0, 4)]).toEqual([10, 20, 30, 255]);
  });
});

describe("flags", () => {
  it("parses --mask x,y,w,h and refuses anything else", () => {
    expect(parseMask("0,0,1080,63")).toEqual({ x: 0, y: 0, w: 1080, h: 63 });
    expect(parseMask(" 1, 2 ,3,4 ")).toEqual({ x: 1, y: 2, w: 3, h: 4 });
    for (const bad of ["", "1,2,3", "1,2,3,4,5", "-1,0,2,2", "0,0,0,5", "a,b,c,d", "1.5,0,2,2"]) {
      expect(refusal(() => parseMask(bad)), bad).toMatchObject({ code: "INVALID_ARGUMENT", field: "mask" });
    }
  });

  it("parses --threshold as a percentage within 0..100", () => {
    expect(parseThreshold("0")).toBe(0);
    expect(parseThreshold("0.5")).toBe(0.5);
    expect(parseThreshold("2.5%")).toBe(2.5);
    expect(parseThreshold("100")).toBe(100);
    for (const bad of ["-1", "100.01", "abc", "", "1e2"]) expect(refusal(() => parseThreshold(bad)), bad).toMatchObject({ code: "INVALID_ARGUMENT", field: "threshold" });
  });

  it("parses durations that carry their unit, within bounds", () => {
    const d = unitDuration(100, 3_600_000);
    expect(d("1500ms", "timeout")).toBe(1500);
    expect(d("10s", "timeout")).toBe(10_000);
    expect(d("1.5s", "timeout")).toBe(1500);
    expect(d("2m", "timeout")).toBe(120_000);
    for (const bad of ["10", "50ms", "2h", "s", "-1s"]) expect(refusal(() => d(bad, "timeout")), bad).toMatchObject({ code: "INVALID_ARGUMENT", field: "timeout" });
  });

  it("prints percentages briefly", () => {
    expect(pctText(0)).toBe("0%");
    expect(pctText(100 / 3)).toBe("33.3333%");
  });
});
