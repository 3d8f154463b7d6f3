import { createRequire } from "node:module";
import type { Sharp, SharpOptions } from "sharp";
import type { ScreenModel } from "./screen-model.js";
import { renderSvg } from "./render-svg.js";

// sharp is CommonJS; require() behaves the same under plain Node and vitest.
const sharp = createRequire(import.meta.url)("sharp") as (input?: Buffer | SharpOptions, options?: SharpOptions) => Sharp;

export interface Frame {
  width: number;
  height: number;
  /** RGBA, 4 bytes per pixel, row-major. */
  rgba: Buffer;
}

/**
 * Turns the current scene into pixels with sharp: PNG for screencap, raw
 * RGBA for framebuffer and screenrecord. The last result of each kind is
 * kept, since a still screen is captured over and over.
 */
export class ScreenRenderer {
  private cache: { key: string; png?: Buffer; frame?: Frame } | undefined;
  /** The status bar's time (HH:MM, UTC). Tests comparing screenshots taken seconds apart fix it: a minute turning over changes the image. */
  clock: () => Date = () => new Date();

  constructor(private readonly screen: ScreenModel) {}

  /** SVG of the scene (or undefined when the screen is off: black). */
  private scene(): { key: string; svg: string | undefined; width: number; height: number } {
    const display = this.screen.display;
    const { width, height } = display.logicalSize;
    const tree = this.screen.tree();
    const now = this.clock();
    const clock = `${String(now.getUTCHours()).padStart(2, "0")}:${String(now.getUTCMinutes()).padStart(2, "0")}`;
    const svg = tree ? renderSvg(tree, display, clock) : undefined;
    return { key: svg ?? `off:${width}x${height}`, svg, width, height };
  }

  private image(svg: string | undefined, width: number, height: number): Sharp {
    if (svg === undefined) return sharp({ create: { width, height, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 1 } } });
    return sharp(Buffer.from(svg), { density: 72 });
  }

  async png(): Promise<Buffer> {
    const { key, svg, width, height } = this.scene();
    if (this.cache?.key === key && this.cache.png) return this.cache.png;
    const png = await this.image(svg, width, height).png({ compressionLevel: 1 }).toBuffer();
    this.cache = this.cache?.key === key ? { ...this.cache, png } : { key, png };
    return png;
  }

  async frame(): Promise<Frame> {
    const { key, svg, width, height } = this.scene();
    if (this.cache?.key === key && this.cache.frame) return this.cache.frame;
    const { data, info } = await this.image(svg, width, height).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
    const frame = { width: info.width, height: info.height, rgba: data };
    this.cache = this.cache?.key === key ? { ...this.cache, frame } : { key, frame };
    return frame;
  }
}
