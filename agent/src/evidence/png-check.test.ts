import { describe, expect, it } from "vitest";
import sharp from "sharp";
import { checkPng } from "./png-check.js";

async function png(width: number, height: number): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: { r: 10, g: 120, b: 200 } } }).png().toBuffer();
}

describe("checkPng", () => {
  it("accepts a PNG that decodes to its declared size", async () => {
    expect(await checkPng(await png(108, 240))).toEqual({ ok: true, width: 108, height: 240 });
  });

  it("rejects empty, non-PNG, truncated, corrupt and lying PNGs", async () => {
    const good = await png(108, 240);
    expect(await checkPng(Buffer.alloc(0))).toMatchObject({ ok: false, code: "SCREENSHOT_EMPTY" });
    expect(await checkPng(Buffer.from("hello world, not a png"))).toMatchObject({ ok: false, code: "SCREENSHOT_NOT_PNG" });
    expect(await checkPng(good.subarray(0, Math.floor(good.length / 2)))).toMatchObject({ ok: false, code: "SCREENSHOT_INVALID_PNG" });
    const corrupt = Buffer.from(good);
    for (let i = 60; i < corrupt.length - 20; i += 7) corrupt[i] = (corrupt[i] as number) ^ 0xff;
    expect(await checkPng(corrupt)).toMatchObject({ ok: false, code: "SCREENSHOT_INVALID_PNG" });
    const lying = Buffer.from(good);
    lying.writeUInt32BE(216, 16); // header claims twice the width; CRC no longer matches either
    expect(await checkPng(lying)).toMatchObject({ ok: false, code: "SCREENSHOT_INVALID_PNG" });
    const huge = Buffer.from(good);
    huge.writeUInt32BE(100_000, 16);
    huge.writeUInt32BE(100_000, 20);
    expect(await checkPng(huge)).toMatchObject({ ok: false, code: "SCREENSHOT_TOO_LARGE" });
  });
});
