/** Identity of a phone model: what its build properties say about it. */
export interface DeviceProfile {
  manufacturer: string;
  brand: string;
  model: string;
  /** ro.product.name */
  name: string;
  /** ro.product.device */
  device: string;
  board: string;
  hardware: string;
  sdk: number;
  release: string;
  buildId: string;
  incremental: string;
  securityPatch: string;
  abiList: readonly string[];
  density: number;
  /** An Android emulator (ro.kernel.qemu=1) rather than a phone. */
  emulator?: boolean;
  /** Natural (portrait) display size in pixels. */
  width: number;
  height: number;
}

/**
 * A few real-world phones, so several simulated devices differ the way a lab's
 * do (vendor, API level, model strings with spaces or dashes).
 */
export const DEVICE_PROFILES: readonly DeviceProfile[] = [
  {
    manufacturer: "Google",
    brand: "google",
    model: "Pixel 7",
    name: "panther",
    device: "panther",
    board: "panther",
    hardware: "panther",
    sdk: 34,
    release: "14",
    buildId: "UQ1A.240205.004",
    incremental: "11269751",
    securityPatch: "2024-02-05",
    abiList: ["arm64-v8a"],
    density: 420,
    width: 1080,
    height: 2400,
  },
  {
    manufacturer: "samsung",
    brand: "samsung",
    model: "SM-S911B",
    name: "dm1qxxx",
    device: "dm1q",
    board: "kalama",
    hardware: "qcom",
    sdk: 33,
    release: "13",
    buildId: "TP1A.220624.014",
    incremental: "S911BXXU1AWBD",
    securityPatch: "2023-03-01",
    abiList: ["arm64-v8a", "armeabi-v7a", "armeabi"],
    density: 480,
    width: 1080,
    height: 2340,
  },
  {
    manufacturer: "Google",
    brand: "google",
    model: "Pixel 6a",
    name: "bluejay",
    device: "bluejay",
    board: "bluejay",
    hardware: "bluejay",
    sdk: 33,
    release: "13",
    buildId: "TQ3A.230901.001",
    incremental: "10750268",
    securityPatch: "2023-09-05",
    abiList: ["arm64-v8a", "armeabi-v7a", "armeabi"],
    density: 420,
    width: 1080,
    height: 2400,
  },
  {
    manufacturer: "motorola",
    brand: "motorola",
    model: "moto g(30)",
    name: "caprip_retail",
    device: "caprip",
    board: "bengal",
    hardware: "qcom",
    sdk: 30,
    release: "11",
    buildId: "RRCS31.Q1-43-20",
    incremental: "7b9e8",
    securityPatch: "2022-02-01",
    abiList: ["arm64-v8a", "armeabi-v7a", "armeabi"],
    density: 280,
    width: 720,
    height: 1600,
  },
];

/** The SDK emulator image, for the emulator-vs-phone distinction (ro.kernel.qemu / ro.boot.qemu). */
export const EMULATOR_PROFILE: DeviceProfile = {
  manufacturer: "Google",
  brand: "google",
  model: "sdk_gphone64_x86_64",
  name: "sdk_gphone64_x86_64",
  device: "emu64xa",
  board: "goldfish_x86_64",
  hardware: "ranchu",
  sdk: 34,
  release: "14",
  buildId: "UE1A.230829.036",
  incremental: "10833587",
  securityPatch: "2023-09-05",
  abiList: ["x86_64", "arm64-v8a"],
  density: 420,
  width: 1080,
  height: 2400,
  emulator: true,
};

export function profileAt(index: number): DeviceProfile {
  return DEVICE_PROFILES[((index % DEVICE_PROFILES.length) + DEVICE_PROFILES.length) % DEVICE_PROFILES.length]!;
}
