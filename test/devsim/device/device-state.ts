import { randomUUID } from 'node:crypto';
import { PropertyStore } from './property-store.js';
import { VIRTUAL_FILES } from './virtual-files.js';

/**
 * Everything "inside" a simulated phone, independent of how it is reached
 * over adb: properties, boot identity, files. The shell and services operate
 * on this.
 */
export class DeviceState {
  readonly props: PropertyStore;
  private currentBootId: string;

  constructor(props: Record<string, string>, bootId: string = randomUUID()) {
    this.props = new PropertyStore(props);
    this.currentBootId = bootId;
  }

  /** Kernel boot id (a UUID); changes on every boot. */
  get bootId(): string {
    return this.currentBootId;
  }

  /** Starts a new boot: fresh boot id. */
  reboot(): string {
    this.currentBootId = randomUUID();
    return this.currentBootId;
  }

  /** Content of a readable file, or undefined if it does not exist. */
  readFile(path: string): Buffer | undefined {
    const file = VIRTUAL_FILES[path];
    return file ? Buffer.from(file(this)) : undefined;
  }
}
