import { BoundedQueue } from "@farm/shared/bounded-queue";

/** Bytes a queue holds before its producer waits. */
const HIGH_WATER = 2 * 1024 * 1024;

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
