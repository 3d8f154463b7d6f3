/**
 * How long a real phone takes, per adb service, so benchmarks can say what a
 * user feels and not only what farm's own code costs. Each figure's source
 * is in test/devsim/README.md ('Latency profiles'); a figure with no
 * published measurement behind it says so there.
 *
 * A delay is a log-normal distribution given by its median and 90th
 * percentile (real timings have a long right tail); instant is all zeros.
 */
export interface Delay {
  medianMs: number;
  p90Ms: number;
}

export interface LatencyProfile {
  name: LatencyProfileName;
  summary: string;
  /** One way, per packet, in each direction (USB transfer scheduling, the Wi-Fi hop). */
  linkMs: Delay;
  /** Device to host (pull, exec-out, screencap) and host to device (push, install), bytes per second; 0 = unlimited. */
  downloadBytesPerSec: number;
  uploadBytesPerSec: number;
  /** adbd starting a shell: or exec: service (fork, exec of sh) before it answers. */
  shellOpenMs: Delay;
  /** fork/exec of each external command a shell runs (toybox mkdir, cat, mv, setprop...). */
  spawnMs: Delay;
  /** screencap: reading the frame, and encoding it as PNG (-p), per megapixel of the display. */
  screencapCaptureMsPerMpx: Delay;
  screencapPngMsPerMpx: Delay;
  /** uiautomator dump: the JVM and its wait for an idle UI, then per node of the tree. */
  uiDumpMs: Delay;
  uiDumpMsPerNode: number;
  /** screenrecord: until the encoder gives its first bytes. */
  screenrecordStartMs: Delay;
  /** adb reboot until the phone is back (sys.boot_completed). */
  rebootMs: number;
}

export const LATENCY_PROFILE_NAMES = ["instant", "pixel-usb", "emulator", "wifi-adb"] as const;
export type LatencyProfileName = (typeof LATENCY_PROFILE_NAMES)[number];

const none: Delay = { medianMs: 0, p90Ms: 0 };
const MB = 1_000_000;

const pixelUsb: LatencyProfile = {
  name: "pixel-usb",
  summary: "a Pixel-class phone on a USB 2.0 port of a lab host",
  linkMs: { medianMs: 0.5, p90Ms: 1 },
  downloadBytesPerSec: 36 * MB,
  uploadBytesPerSec: 36 * MB,
  shellOpenMs: { medianMs: 20, p90Ms: 30 },
  spawnMs: { medianMs: 2, p90Ms: 4 },
  screencapCaptureMsPerMpx: { medianMs: 40, p90Ms: 60 },
  screencapPngMsPerMpx: { medianMs: 230, p90Ms: 330 },
  uiDumpMs: { medianMs: 1_800, p90Ms: 2_500 },
  uiDumpMsPerNode: 2.25,
  screenrecordStartMs: { medianMs: 300, p90Ms: 600 },
  rebootMs: 25_000,
};

export const LATENCY_PROFILES: Readonly<Record<LatencyProfileName, LatencyProfile>> = {
  instant: {
    name: "instant",
    summary: "answers at once: what farm's own code costs",
    linkMs: none,
    downloadBytesPerSec: 0,
    uploadBytesPerSec: 0,
    shellOpenMs: none,
    spawnMs: none,
    screencapCaptureMsPerMpx: none,
    screencapPngMsPerMpx: none,
    uiDumpMs: none,
    uiDumpMsPerNode: 0,
    screenrecordStartMs: none,
    rebootMs: 2_000,
  },
  "pixel-usb": pixelUsb,
  emulator: {
    name: "emulator",
    summary: "the Android emulator on the same host (1440x3120 in the source measurements)",
    linkMs: { medianMs: 0.1, p90Ms: 0.3 },
    downloadBytesPerSec: 290 * MB,
    uploadBytesPerSec: 290 * MB,
    shellOpenMs: { medianMs: 25, p90Ms: 34 },
    spawnMs: { medianMs: 1.6, p90Ms: 3 },
    screencapCaptureMsPerMpx: { medianMs: 17, p90Ms: 20 },
    screencapPngMsPerMpx: { medianMs: 122, p90Ms: 175 },
    uiDumpMs: { medianMs: 1_500, p90Ms: 2_300 },
    uiDumpMsPerNode: 2.25,
    screenrecordStartMs: { medianMs: 300, p90Ms: 600 },
    rebootMs: 12_000,
  },
  "wifi-adb": {
    ...pixelUsb,
    name: "wifi-adb",
    summary: "the same phone over Wi-Fi adb on a busy lab LAN",
    linkMs: { medianMs: 3, p90Ms: 30 },
    downloadBytesPerSec: 4 * MB,
    uploadBytesPerSec: 4 * MB,
    rebootMs: 30_000,
  },
};

/** The profile of a name, or an error naming the choices. */
export function latencyProfile(name: string): LatencyProfile {
  const p = (LATENCY_PROFILES as Record<string, LatencyProfile | undefined>)[name];
  if (!p) throw new TypeError(`unknown latency profile ${JSON.stringify(name)}; choose one of ${LATENCY_PROFILE_NAMES.join(", ")}`);
  return p;
}
