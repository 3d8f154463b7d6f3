/**
 * Parsers for what Android's own tools print. Each returns null when the
 * text does not say, so a missing observation is reported, never guessed.
 */

/** `getprop` with no arguments: lines of `[key]: [value]`. */
export function parseGetprop(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of text.matchAll(/^\[([^\]]+)\]: \[([^\]]*)\]\r?$/gm)) out[m[1] as string] = m[2] as string;
  return out;
}

/** `wm size`: the override wins over the physical size. */
export function parseWmSize(text: string): { width: number; height: number } | null {
  const pick = (label: string) => {
    const m = new RegExp(`${label} size:\\s*(\\d+)x(\\d+)`).exec(text);
    return m ? { width: Number(m[1]), height: Number(m[2]) } : null;
  };
  const size = pick("Override") ?? pick("Physical");
  return size && size.width > 0 && size.height > 0 ? size : null;
}

/** `wm density`: the override wins over the physical density. */
export function parseWmDensity(text: string): number | null {
  const m = /Override density:\s*(\d+)/.exec(text) ?? /Physical density:\s*(\d+)/.exec(text);
  const n = m ? Number(m[1]) : NaN;
  return n > 0 ? n : null;
}

/** `dumpsys input`: the primary display viewport's orientation, else SurfaceOrientation. */
export function parseRotation(text: string): number | null {
  const viewport = /Viewport INTERNAL:[^\n]*orientation=(\d)/.exec(text);
  const surface = /SurfaceOrientation:\s*(\d)/.exec(text);
  const m = viewport ?? surface;
  const n = m ? Number(m[1]) : NaN;
  return n >= 0 && n <= 3 ? n : null;
}

/** `dumpsys power`: is the device awake? */
export function parseAwake(text: string): boolean | null {
  const wake = /mWakefulness=(\w+)/.exec(text);
  if (wake) return wake[1] === "Awake";
  const display = /Display Power: state=(\w+)/.exec(text);
  return display ? display[1] === "ON" : null;
}

/** `dumpsys window`: is the keyguard (lock screen) showing? */
export function parseLocked(text: string): boolean | null {
  const m = /mKeyguardShowing=(true|false)/.exec(text) ?? /mShowingLockscreen=(true|false)/.exec(text) ?? /isStatusBarKeyguard=(true|false)/.exec(text);
  return m ? m[1] === "true" : null;
}

/** deviceType from ro.kernel.qemu / ro.boot.qemu, as the bundle contract defines it. */
export function deviceTypeOf(kernelQemu: string | null, bootQemu: string | null): "emulator" | "physical" | "unknown" {
  if (kernelQemu === "1" || bootQemu === "1") return "emulator";
  if (kernelQemu === "0" || bootQemu === "0") return "physical";
  return "unknown";
}

/** A UIAutomator dump: well-formed enough to be a whole hierarchy document. */
export function looksLikeHierarchy(xml: string): boolean {
  const t = xml.trim();
  return t.startsWith("<?xml") && /<hierarchy[\s>]/.test(t) && t.endsWith("</hierarchy>");
}
