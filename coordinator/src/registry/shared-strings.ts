import type { DeviceProperties } from "@farm/shared/gen/farm/v1/registry_pb";

/**
 * One copy of each short value many phones report alike. A decoded message
 * holds a string of its own per field, so 10,000 phones of a few models kept
 * 10,000 copies each of "Pixel 7", "Google", "14", "arm64-v8a", "ok"
 * (test/bench/coordinator-load.ts). The table is bounded: when full it starts
 * over, so odd values cost at most its size.
 */
export class SharedStrings {
  private readonly seen = new Map<string, string>();

  constructor(
    private readonly maxEntries = 4096,
    private readonly maxLength = 64,
  ) {}

  /** The kept copy of `s` (kept now if it is new), or `s` itself when too long to keep. */
  share(s: string): string {
    if (s.length > this.maxLength) return s;
    const kept = this.seen.get(s);
    if (kept !== undefined) return kept;
    if (this.seen.size >= this.maxEntries) this.seen.clear();
    this.seen.set(s, s);
    return s;
  }

  /**
   * The properties with their fleet-wide values shared, in place. Identity
   * fields (serial numbers, boot and physical ids) differ per phone and are
   * left as they are.
   */
  shareProperties(p: DeviceProperties): DeviceProperties {
    p.model = this.share(p.model);
    p.manufacturer = this.share(p.manufacturer);
    p.androidVersion = this.share(p.androidVersion);
    p.abi = this.share(p.abi);
    p.identityStatus = this.share(p.identityStatus);
    p.platform = this.share(p.platform);
    return p;
  }

  get size(): number {
    return this.seen.size;
  }
}
