/** Kinds of broken screenshot `screencap -p` can produce. */
export type PngFault = "corrupt" | "truncated" | "lying-header";

/**
 * Faults that stay switched on until cleared. One-shot faults (vanish,
 * reboot, screen off/locked) are actions on SimDevice instead.
 */
export interface FaultSettings {
  /** Vanish (drop connections, stop listening) once this many more bytes of sync file data have moved. */
  vanishAfterBytes?: number;
  /** Service-name prefixes (e.g. `sync:`, `shell:`, `exec:`) whose new streams are accepted and then never answered; `''` hangs every service. */
  hangServices?: string[];
  /**
   * Services whose name contains one of these strings are held as on a frozen phone: not answered and
   * not run until `DeviceFaults.releaseHeld()`, then opened and run as if they had just arrived (a
   * CLSE the host sent meanwhile names no stream yet and is ignored, as a frozen adbd would read it
   * after the OPEN). In-process only (not in FAULT_KEYS): nothing remote could release them.
   */
  holdServicesContaining?: string[];
  /** Added delay for every packet the device sends. */
  latencyMs?: number;
  /** Device-to-host bandwidth limit. */
  bandwidthBytesPerSec?: number;
  /** screencap -p output is damaged this way. */
  png?: PngFault;
  /** screenrecord cannot start its encoder. */
  screenrecordFails?: boolean;
  /** screenrecord writes a finalized MP4 whose encoded frames are damaged (a span of the media data is garbage). */
  screenrecordCorrupt?: boolean;
  /** Storage is full: sync SEND and file writes fail with ENOSPC. */
  storageFull?: boolean;
  /** run-as refuses every package as if none were debuggable. */
  runAsDenied?: boolean;
  /** `wm density` fails (exit 255, no density printed), as on builds whose window manager refuses the shell. */
  densityUnavailable?: boolean;
  /** `dumpsys input` is refused (no viewport, no SurfaceOrientation), as on builds that deny the shell DUMP. */
  rotationUnavailable?: boolean;
  /** screenrecord ignores `--time-limit` and records until signalled (or 180 s). */
  screenrecordOverrun?: boolean;
  /** Packages `pm uninstall` refuses (Failure [DELETE_FAILED_INTERNAL_ERROR]), as a device admin app's would be. */
  uninstallRefused?: string[];
  /** The app SDK answers every request with a 200 header, then one byte every N ms, and never finishes the body. */
  sdkTrickleMs?: number;
}

export const FAULT_KEYS = [
  "vanishAfterBytes",
  "hangServices",
  "latencyMs",
  "bandwidthBytesPerSec",
  "png",
  "screenrecordFails",
  "screenrecordCorrupt",
  "storageFull",
  "runAsDenied",
  "densityUnavailable",
  "rotationUnavailable",
  "screenrecordOverrun",
  "sdkTrickleMs",
  "uninstallRefused",
] as const satisfies ReadonlyArray<keyof FaultSettings>;

const PNG_FAULTS: readonly PngFault[] = ["corrupt", "truncated", "lying-header"];

/**
 * Validates untrusted fault settings (control API, scenario files); null
 * means "clear this fault". Throws with the offending key.
 */
export function parseFaultSettings(input: unknown): Partial<Record<keyof FaultSettings, unknown>> {
  if (typeof input !== "object" || input === null || Array.isArray(input)) throw new TypeError("faults must be a JSON object");
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(input)) {
    if (!(FAULT_KEYS as readonly string[]).includes(key)) throw new TypeError(`unknown fault ${JSON.stringify(key)}; known: ${FAULT_KEYS.join(", ")}`);
    if (value === null) {
      out[key] = null;
      continue;
    }
    switch (key) {
      case "vanishAfterBytes":
      case "sdkTrickleMs":
      case "latencyMs":
      case "bandwidthBytesPerSec":
        if (typeof value !== "number" || !Number.isFinite(value) || value < 0) throw new TypeError(`${key} must be a non-negative number`);
        break;
      case "hangServices":
      case "uninstallRefused":
        if (!Array.isArray(value) || !value.every((item) => typeof item === "string")) throw new TypeError(`${key} must be an array of strings`);
        break;
      case "png":
        if (!PNG_FAULTS.includes(value as PngFault)) throw new TypeError(`png must be one of ${PNG_FAULTS.join(", ")}`);
        break;
      default:
        if (typeof value !== "boolean") throw new TypeError(`${key} must be true or false`);
    }
    out[key] = value;
  }
  return out;
}
