import { DEVICE_PROFILES, type DeviceProfile } from "../devsim/index.js";

/**
 * The Pixel 7 with its 9:20 screen at 432x960 instead of 1080x2400: a sixth
 * of the pixels for every screenshot and recorded frame devsim renders and
 * encodes. For tests whose subject is not the pixels (docs/testing.md).
 */
export const SMALL_SCREEN: DeviceProfile = { ...DEVICE_PROFILES[0]!, width: 432, height: 960 };
