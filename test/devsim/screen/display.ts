/** Size in pixels. */
export interface Size {
  width: number;
  height: number;
}

/**
 * The built-in display: physical size and density, `wm size`/`wm density`
 * overrides, rotation (0–3, quarter turns), power and keyguard state.
 */
export class Display {
  overrideSize: Size | undefined;
  overrideDensity: number | undefined;
  /** Surface rotation in quarter turns: 0 natural, 1 = 90°, 2 = 180°, 3 = 270°. */
  rotation = 0;
  screenOn = true;
  locked = false;

  constructor(
    readonly physical: Size,
    readonly physicalDensity: number,
  ) {}

  /** Size in the natural orientation, honouring `wm size`. */
  get naturalSize(): Size {
    return this.overrideSize ?? this.physical;
  }

  /** Size as apps and screencap see it: width and height swap in landscape. */
  get logicalSize(): Size {
    const { width, height } = this.naturalSize;
    return this.rotation % 2 === 1 ? { width: height, height: width } : { width, height };
  }

  get density(): number {
    return this.overrideDensity ?? this.physicalDensity;
  }

  /** dp → px at the current density. */
  dp(value: number): number {
    return Math.round((value * this.density) / 160);
  }
}
