import { BoundedQueue } from "@farm/shared/bounded-queue";

/**
 * Bytes a queue holds before its producer waits: small, since a stalled adb
 * stream holds this twice (once each way) besides its HTTP/2 windows, and
 * the windows already keep a fast stream moving.
 */
const HIGH_WATER = 256 * 1024;

/**
 * Bytes between two streams with backpressure: `push` resolves once the
 * queue is under its high-water mark, so a fast side (a device streaming
 * logcat) waits for a slow one (a caller across the world) instead of
 * filling the coordinator's memory. Consumed as an AsyncIterable.
 */
export class ByteQueue extends BoundedQueue<Uint8Array> {
  constructor(highWater = HIGH_WATER) {
    super(highWater, (bytes) => bytes.length);
  }
}
