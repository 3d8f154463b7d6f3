import { ByteQueue } from "./byte-queue.js";

/** One adb stream: the caller's side and the agent's, joined by the stream id. */
export interface AdbStreamPair {
  /** Bytes from the device, for the caller; closed when the agent's side ends. */
  readonly toCaller: ByteQueue;
  /** Bytes for the device; closed when the caller's side ends. */
  readonly toAgent: ByteQueue;
  /** Resolves when the agent's stream has joined. */
  readonly joined: Promise<void>;
}

/** Streams waiting for, or joined with, the agent's ServeAdbStream, by stream id. */
export class AdbStreamRelay {
  private readonly waiting = new Map<string, { pair: AdbStreamPair; join: () => void }>();

  open(streamId: string): AdbStreamPair {
    let join = () => {};
    const joined = new Promise<void>((resolve) => (join = resolve));
    const pair: AdbStreamPair = { toCaller: new ByteQueue(), toAgent: new ByteQueue(), joined };
    this.waiting.set(streamId, { pair, join });
    return pair;
  }

  /** The agent's stream claims a stream; each can be claimed once. */
  claim(streamId: string): AdbStreamPair | undefined {
    const w = this.waiting.get(streamId);
    if (!w) return undefined;
    this.waiting.delete(streamId);
    w.join();
    return w.pair;
  }

  forget(streamId: string): void {
    this.waiting.delete(streamId);
  }
}
