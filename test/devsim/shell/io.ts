/** Where a command writes (stdout, stderr, a pipe, a stream). */
export interface OutputSink {
  /** Resolves when the sink can take more (backpressure). */
  write(data: Uint8Array | string): Promise<void>;
}

/** Where a command reads stdin from. */
export interface InputSource {
  /** Next chunk, or null at end of input. */
  read(): Promise<Buffer | null>;
}

export const NULL_SINK: OutputSink = { write: () => Promise.resolve() };
export const EMPTY_INPUT: InputSource = { read: () => Promise.resolve(null) };

export function toBuffer(data: Uint8Array | string): Buffer {
  return typeof data === "string" ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * A bounded in-memory byte pipe, like a kernel pipe: writers wait while it is
 * full, readers wait while it is empty, and once the reading end is gone writes
 * are discarded (where a real writer would get SIGPIPE).
 */
export class BytePipe implements OutputSink, InputSource {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private writeClosed = false;
  private readClosed = false;
  private readers: Array<(chunk: Buffer | null) => void> = [];
  private writers: Array<() => void> = [];

  constructor(private readonly capacity = 64 * 1024) {}

  write(data: Uint8Array | string): Promise<void> {
    if (this.writeClosed || this.readClosed) return Promise.resolve();
    const chunk = toBuffer(data);
    if (chunk.length === 0) return Promise.resolve();
    const reader = this.readers.shift();
    if (reader) {
      reader(chunk);
      return Promise.resolve();
    }
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size <= this.capacity) return Promise.resolve();
    return new Promise((resolve) => this.writers.push(resolve));
  }

  read(): Promise<Buffer | null> {
    const chunk = this.chunks.shift();
    if (chunk) {
      this.size -= chunk.length;
      if (this.size <= this.capacity) this.releaseWriters();
      return Promise.resolve(chunk);
    }
    if (this.writeClosed || this.readClosed) return Promise.resolve(null);
    return new Promise((resolve) => this.readers.push(resolve));
  }

  /** Writer is done: readers get EOF after the buffered data. */
  close(): void {
    this.writeClosed = true;
    for (const reader of this.readers) reader(null);
    this.readers = [];
  }

  /** Reader is gone: drop buffered data and unblock writers. */
  closeRead(): void {
    this.readClosed = true;
    this.chunks.length = 0;
    this.size = 0;
    this.releaseWriters();
    for (const reader of this.readers) reader(null);
    this.readers = [];
  }

  private releaseWriters(): void {
    const writers = this.writers;
    this.writers = [];
    for (const resolve of writers) resolve();
  }
}

/** Accumulates everything written, for tests and captures. */
export class CollectingSink implements OutputSink {
  private readonly chunks: Buffer[] = [];

  write(data: Uint8Array | string): Promise<void> {
    this.chunks.push(Buffer.from(toBuffer(data)));
    return Promise.resolve();
  }

  buffer(): Buffer {
    return Buffer.concat(this.chunks);
  }

  text(): string {
    return this.buffer().toString("utf8");
  }
}

/** Input from a fixed string/buffer. */
export function inputFrom(data: Uint8Array | string): InputSource {
  let pending: Buffer | null = toBuffer(data);
  return {
    read() {
      const chunk = pending && pending.length > 0 ? pending : null;
      pending = null;
      return Promise.resolve(chunk);
    },
  };
}

/** Reads a source to its end. */
export async function readAll(source: InputSource): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for (let chunk = await source.read(); chunk; chunk = await source.read()) chunks.push(chunk);
  return Buffer.concat(chunks);
}
