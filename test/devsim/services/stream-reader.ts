import type { ServiceStream } from "../transport/adb-stream.js";

/**
 * Exact-length reads over a stream's WRTEs, which are arbitrary slices of the
 * host's byte stream (one WRTE may hold several requests, or half of one).
 */
export class StreamReader {
  private chunks: Buffer[] = [];
  private buffered = 0;

  constructor(private readonly stream: ServiceStream) {}

  /** Exactly n bytes, or null if the stream closed first. */
  async read(n: number): Promise<Buffer | null> {
    while (this.buffered < n) {
      const chunk = await this.stream.read();
      if (!chunk) return null;
      this.chunks.push(chunk);
      this.buffered += chunk.length;
    }
    const joined = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.buffered);
    const out = joined.subarray(0, n);
    const rest = joined.subarray(n);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.buffered = rest.length;
    return out;
  }
}
