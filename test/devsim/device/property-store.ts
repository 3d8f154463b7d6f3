/**
 * Android system properties. Like init's property service, `ro.*` keys are
 * write-once for the shell's `setprop`; the simulator's own API (`set`) may
 * change anything, e.g. to script a fault.
 */
export class PropertyStore {
  private readonly values = new Map<string, string>();

  constructor(initial: Record<string, string> = {}) {
    for (const [key, value] of Object.entries(initial)) this.set(key, value);
  }

  get(key: string): string | undefined {
    return this.values.get(key);
  }

  has(key: string): boolean {
    return this.values.has(key);
  }

  /** Unconditional write (simulator API). An empty value keeps the key, as on Android. */
  set(key: string, value: string): void {
    this.values.set(key, value);
  }

  /** What `setprop` may do: false when the key is read-only and already set, or invalid. */
  trySet(key: string, value: string): boolean {
    if (!/^[A-Za-z0-9_.\-@:]+$/.test(key)) return false;
    if (key.startsWith("ro.") && this.values.has(key)) return false;
    this.set(key, value);
    return true;
  }

  /** All properties sorted by key, as `getprop` lists them. */
  entries(): Array<[string, string]> {
    return [...this.values.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }

  toRecord(): Record<string, string> {
    return Object.fromEntries(this.entries());
  }
}
