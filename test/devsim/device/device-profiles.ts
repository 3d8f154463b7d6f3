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
}

/**
 * A few real-world phones, so several simulated devices differ the way a lab's
 * do (vendor, API level, model strings with spaces or dashes).
 */
export const DEVICE_PROFILES: readonly DeviceProfile[] = [
  {
    manufacturer: 'Google', brand: 'google', model: 'Pixel 7', name: 'panther', device: 'panther',
    board: 'panther', hardware: 'panther', sdk: 34, release: '14', buildId: 'UQ1A.240205.004',
    incremental: '11269751', securityPatch: '2024-02-05', abiList: ['arm64-v8a'], density: 420,
  },
  {
    manufacturer: 'samsung', brand: 'samsung', model: 'SM-S911B', name: 'dm1qxxx', device: 'dm1q',
    board: 'kalama', hardware: 'qcom', sdk: 33, release: '13', buildId: 'TP1A.220624.014',
    incremental: 'S911BXXU1AWBD', securityPatch: '2023-03-01', abiList: ['arm64-v8a', 'armeabi-v7a', 'armeabi'], density: 480,
  },
  {
    manufacturer: 'Google', brand: 'google', model: 'Pixel 6a', name: 'bluejay', device: 'bluejay',
    board: 'bluejay', hardware: 'bluejay', sdk: 33, release: '13', buildId: 'TQ3A.230901.001',
    incremental: '10750268', securityPatch: '2023-09-05', abiList: ['arm64-v8a', 'armeabi-v7a', 'armeabi'], density: 420,
  },
  {
    manufacturer: 'motorola', brand: 'motorola', model: 'moto g(30)', name: 'caprip_retail', device: 'caprip',
    board: 'bengal', hardware: 'qcom', sdk: 30, release: '11', buildId: 'RRCS31.Q1-43-20',
    incremental: '7b9e8', securityPatch: '2022-02-01', abiList: ['arm64-v8a', 'armeabi-v7a', 'armeabi'], density: 280,
  },
];

export function profileAt(index: number): DeviceProfile {
  return DEVICE_PROFILES[((index % DEVICE_PROFILES.length) + DEVICE_PROFILES.length) % DEVICE_PROFILES.length]!;
}
