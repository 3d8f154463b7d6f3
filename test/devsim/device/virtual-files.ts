import type { DeviceState } from './device-state.js';

/**
 * Read-only files whose content is computed from device state (procfs-like).
 * A full per-device filesystem will sit next to this table; these entries
 * stay dynamic because their content changes with the state (e.g. reboots).
 */
export const VIRTUAL_FILES: Readonly<Record<string, (state: DeviceState) => string>> = {
  '/dev/null': () => '',
  '/proc/sys/kernel/random/boot_id': (state) => `${state.bootId}\n`,
};
