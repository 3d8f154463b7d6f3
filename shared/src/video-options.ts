import { invalidArgument } from "./errors.js";

export const VIDEO_DURATION_MIN_S = 1;
export const VIDEO_DURATION_MAX_S = 180;
/** The default size's longest edge. */
export const VIDEO_DEFAULT_LONG_EDGE = 1280;
/** An explicit size's aspect ratio may differ from the display's by this much. */
export const VIDEO_ASPECT_TOLERANCE = 0.01;

// A recording's id is named by --recording (a test session is another thing: `farm session`).
export const videoFields = { duration: "duration-seconds", size: "size", session: "recording" } as const;

export interface Size {
  width: number;
  height: number;
}

/** An integer 1..180 (seconds), given as a number or as the flag's text. */
export function validateDurationSeconds(value: string | number | undefined): number {
  if (value === undefined || value === "" || value === 0) throw invalidArgument(videoFields.duration, "--duration-seconds is required (an integer from 1 to 180)");
  const text = String(value);
  if (!/^[0-9]+$/.test(text)) throw invalidArgument(videoFields.duration, `--duration-seconds must be an integer from 1 to 180, got "${text}"`);
  const n = Number(text);
  if (n < VIDEO_DURATION_MIN_S || n > VIDEO_DURATION_MAX_S) throw invalidArgument(videoFields.duration, `--duration-seconds must be from 1 to 180, got ${n}`);
  return n;
}

/** "WIDTHxHEIGHT" with positive even edges; undefined or "" means the default. */
export function parseVideoSize(text: string | undefined): Size | undefined {
  if (text === undefined || text === "") return undefined;
  const m = /^([0-9]{1,5})x([0-9]{1,5})$/.exec(text);
  if (!m) throw invalidArgument(videoFields.size, `--size must be WIDTHxHEIGHT (e.g. 720x1280), got "${text}"`);
  const size = { width: Number(m[1]), height: Number(m[2]) };
  if (size.width <= 0 || size.height <= 0 || size.width % 2 !== 0 || size.height % 2 !== 0) {
    throw invalidArgument(videoFields.size, `--size edges must be positive even numbers, got ${text}`);
  }
  return size;
}

/** The display as the recorder sees it: width and height swapped for rotations 1 and 3. */
export function orientedDisplay(display: Size, rotation: number | null): Size {
  return rotation === 1 || rotation === 3 ? { width: display.height, height: display.width } : display;
}

/** The display scaled to a longest edge of at most 1280, both edges rounded down to positive even numbers. */
export function defaultVideoSize(display: Size): Size {
  const scale = Math.min(1, VIDEO_DEFAULT_LONG_EDGE / Math.max(display.width, display.height));
  const even = (n: number) => Math.max(2, Math.floor((n * scale) / 2) * 2);
  return { width: even(display.width), height: even(display.height) };
}

/** Refuses an explicit size whose aspect ratio is more than 1% off the display's. */
export function checkVideoAspect(size: Size, display: Size): void {
  const want = display.width / display.height;
  const got = size.width / size.height;
  if (Math.abs(got - want) / want > VIDEO_ASPECT_TOLERANCE) {
    throw invalidArgument(
      videoFields.size,
      `--size ${size.width}x${size.height} has aspect ratio ${got.toFixed(4)}; the display (${display.width}x${display.height}) has ${want.toFixed(4)} and at most 1% difference is allowed`,
    );
  }
}

/** Session ids are UUIDs (they are also the bundle's evidence id). */
export function validateSessionId(id: string): string {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) {
    throw invalidArgument(videoFields.session, `"${id}" is not a recording id (a UUID) or a bundle's manifest path`);
  }
  return id;
}
