import type { Duplex } from "node:stream";
import { stageTrace } from "@farm/shared/stage-trace";
import { A_CLSE, A_OKAY, A_WRTE } from "./adb-packet.js";

/** What a stream needs from its connection. */
export interface StreamHost {
  send(command: number, arg0: number, arg1: number, payload?: Uint8Array): void;
  /** The negotiated largest WRTE payload. */
  readonly maxPayload: number;
  forget(localId: number): void;
  log(line: string): void;
  /** The host broke the protocol on a stream: the whole connection is dropped, as adbd drops a broken transport. */
  protocolError(reason: string): void;
}

/** Opens one adb service on the phone: resolves to its byte stream, or rejects with why the phone (or the farm) refused. */
export type AdbStreamOpener = (service: string) => Promise<Duplex>;

/** How long a stream the host closed may take to flush its last bytes to the phone before it is cut. */
const FLUSH_GRACE_MS = 5_000;

/** The service's kind for logs ("shell,v2,raw:", "sync:"): never the command, which may hold secrets. */
export function serviceKind(service: string): string {
  const colon = service.indexOf(":");
  return colon < 0 ? service.slice(0, 40) : service.slice(0, colon + 1);
}

/**
 * One adb stream between the local adb server and a backend byte stream.
 * Flow control is adb's: toward the host one WRTE at a time, each waiting
 * for its OKAY; from the host, our OKAY goes out only once the backend took
 * the bytes, so a slow phone slows the host instead of filling memory.
 */
export class AdbdStream {
  private duplex: Duplex | undefined;
  /** Nothing more goes to the host: it closed the stream, or we did. */
  private done = false;
  private ackWaiter: (() => void) | undefined;
  /**
   * The host's last WRTE is not acknowledged yet (the phone has not taken
   * it). adb sends one WRTE per stream and waits for its OKAY (we advertise
   * no delayed_ack), so another one now is a flood that would only fill
   * memory: the connection is dropped.
   */
  private hostWriteUnacked = false;
  /** The stream's id in the remote adb benchmark's marks (stage-trace.ts): its service kind, when tracing. */
  private trace: string | undefined;
  private marked = new Set<string>();

  constructor(
    private readonly conn: StreamHost,
    readonly localId: number,
    readonly remoteId: number,
  ) {}

  async open(service: string, openStream: AdbStreamOpener): Promise<void> {
    if (stageTrace) this.trace = `adb:${serviceKind(service)}`;
    this.mark("cli.open");
    let duplex: Duplex;
    try {
      duplex = await openStream(service);
    } catch (err) {
      // adb has no refusal message: CLSE(0, id) and the client says "closed". Say why here.
      this.conn.log(`adb stream ${serviceKind(service)} refused: ${(err as Error).message}`);
      if (!this.done) this.conn.send(A_CLSE, 0, this.remoteId);
      this.finish();
      return;
    }
    // Errors end the stream through the read loop; this keeps them from being unhandled.
    duplex.on("error", () => undefined);
    if (this.done) {
      duplex.destroy();
      return;
    }
    this.duplex = duplex;
    this.mark("cli.opened");
    this.conn.send(A_OKAY, this.localId, this.remoteId);
    await this.pumpToHost(duplex);
  }

  /**
   * The phone's bytes to the host, one WRTE at a time as adb requires. What
   * arrived while a WRTE waited for its OKAY goes out as one WRTE (up to the
   * negotiated payload), not one per message: each WRTE costs a round trip
   * through the host's adb server and its client, so a pull in 64 KiB
   * messages moved at the speed of that round trip. Once the phone's side
   * has ended with nothing left, the CLSE goes out without waiting for the
   * last WRTE's OKAY, as adbd does (the host delivers what it has, then
   * closes): a short command's output does not wait for that round trip.
   */
  private async pumpToHost(duplex: Duplex): Promise<void> {
    let ended = false;
    let wake: (() => void) | undefined;
    const poke = () => {
      const w = wake;
      wake = undefined;
      w?.();
    };
    const onEnd = () => {
      ended = true;
      poke();
    };
    duplex.on("readable", poke);
    duplex.once("end", onEnd);
    duplex.once("close", onEnd);
    /** The next readable, end or close (or the host's OKAY, when `acked` is given). */
    const event = (acked?: Promise<void>) => new Promise<void>((resolve) => {
      wake = resolve;
      void acked?.then(resolve);
    });
    try {
      for (;;) {
        // Everything buffered, joined; null when nothing is (a read at the end makes "end" come).
        const chunk = duplex.read() as Buffer | null;
        if (chunk === null) {
          // Not on the host's close: what it wrote is still on its way to the phone (onHostClose's grace).
          if (ended || duplex.destroyed) break;
          await event();
          continue;
        }
        // After the host closed, the rest is read and dropped until the phone's side ends.
        for (let off = 0; off < chunk.length && !this.done; off += this.conn.maxPayload) {
          let ackCame = false;
          const acked = new Promise<void>((resolve) => (this.ackWaiter = resolve)).then(() => {
            ackCame = true;
          });
          this.conn.send(A_WRTE, this.localId, this.remoteId, chunk.subarray(off, off + this.conn.maxPayload));
          this.mark("cli.first-wrte");
          if (off + this.conn.maxPayload < chunk.length) {
            await acked;
            continue;
          }
          // The last of what we had: wait for the OKAY, unless the phone's side ends with nothing more to send.
          while (!ackCame && !this.done) {
            if (duplex.readableLength > 0) {
              await acked;
              break;
            }
            if (ended || duplex.destroyed) break;
            await event(acked);
            if (!ackCame && duplex.readableLength === 0 && !ended) duplex.read(0);
          }
        }
      }
    } catch {
      // The backend failed or was cut: the stream ends either way.
    } finally {
      duplex.off("readable", poke);
      duplex.off("end", onEnd);
      duplex.off("close", onEnd);
    }
    this.mark("cli.clse");
    if (!this.done) this.conn.send(A_CLSE, this.localId, this.remoteId);
    this.finish();
  }

  /** Marks a stage once per stream, when tracing. */
  private mark(stage: string): void {
    if (!this.trace || this.marked.has(stage)) return;
    this.marked.add(stage);
    stageTrace?.mark(this.trace, stage);
  }

  /** The host acknowledged our last WRTE. */
  onAck(): void {
    this.mark("cli.host-okay");
    const w = this.ackWaiter;
    this.ackWaiter = undefined;
    w?.();
  }

  /** Bytes from the host: acknowledged once the backend takes them. */
  onWrite(data: Buffer): void {
    this.mark("cli.host-wrte");
    if (this.hostWriteUnacked && !this.done) {
      this.conn.protocolError(`the adb server sent another WRTE on stream ${this.localId} before its last one was acknowledged`);
      return;
    }
    const duplex = this.duplex;
    if (this.done || !duplex || !duplex.writable) return;
    this.hostWriteUnacked = true;
    const ack = () => {
      this.hostWriteUnacked = false;
      if (!this.done) this.conn.send(A_OKAY, this.localId, this.remoteId);
    };
    if (duplex.write(data)) ack();
    else duplex.once("drain", ack);
  }

  /** The host closed the stream: what it wrote still reaches the phone, then the backend is cut. */
  onHostClose(): void {
    this.mark("cli.host-clse");
    if (this.done) return;
    this.markDone();
    const duplex = this.duplex;
    if (!duplex) return;
    duplex.end();
    const timer = setTimeout(() => duplex.destroy(), FLUSH_GRACE_MS);
    timer.unref();
    duplex.once("close", () => clearTimeout(timer));
  }

  /** The connection is gone: cut the backend at once. */
  abort(): void {
    this.markDone();
    this.duplex?.destroy();
  }

  private markDone(): void {
    this.done = true;
    this.conn.forget(this.localId);
    this.onAck();
  }

  private finish(): void {
    this.markDone();
    this.duplex?.destroy();
  }
}
