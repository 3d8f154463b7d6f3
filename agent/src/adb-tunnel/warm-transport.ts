import type { Socket } from "node:net";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { openDeviceService, openServiceOn, selectTransport, type OpenService } from "../adb/adb-service.js";

/**
 * One tunnel's next connection to the lab's adb server, opened ahead of need
 * with the phone's transport already selected: a stream's open is then the
 * service request alone, not a connect, host:transport:SERIAL and its OKAY
 * first (a round trip through the adb server on every `adb shell`). Nothing
 * reaches the phone before the service is sent, so a spare that is never
 * used costs the adb server one idle socket. One is kept, made again after
 * each use; one the adb server closed (the phone went away) is dropped and
 * the stream opens the old way, as it does while none is ready.
 */
export class WarmTransport {
  private ready: { socket: Socket; unwatch: () => void } | undefined;
  private making: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly adb: AdbServerAddress,
    private readonly serial: string,
  ) {}

  /** Starts making a spare, when none is ready or on its way. */
  prepare(): void {
    if (this.closed || this.ready || this.making) return;
    this.making = selectTransport(this.adb, this.serial, AbortSignal.timeout(15_000)).then(
      (socket) => {
        this.making = undefined;
        if (this.closed) return void socket.destroy();
        // Nothing comes before the service request: bytes, an end or an error mean the server dropped it.
        const drop = () => {
          socket.destroy();
          if (this.ready?.socket === socket) this.ready = undefined;
        };
        const unwatch = () => {
          socket.off("data", drop);
          socket.off("end", drop);
          socket.off("error", drop);
          socket.off("close", drop);
        };
        socket.on("data", drop);
        socket.on("end", drop);
        socket.on("error", drop);
        socket.on("close", drop);
        this.ready = { socket, unwatch };
      },
      () => {
        // No spare (the phone is gone, or the server refused): streams open the old way and report why.
        this.making = undefined;
      },
    );
  }

  /** Whether a spare is ready now. */
  get hasSpare(): boolean {
    return this.ready !== undefined;
  }

  /** Resolves once the spare being made (if any) is ready or failed. */
  async made(): Promise<void> {
    await this.making;
  }

  /** Opens `service` on the phone: on the spare when one is ready, else on a fresh connection; then makes the next spare. */
  async open(service: string, signal: AbortSignal): Promise<OpenService> {
    const spare = this.ready;
    this.ready = undefined;
    try {
      if (!spare || spare.socket.destroyed) return await openDeviceService(this.adb, this.serial, service, signal);
      spare.unwatch();
      return await openServiceOn(spare.socket, service, signal);
    } finally {
      this.prepare();
    }
  }

  close(): void {
    this.closed = true;
    this.ready?.socket.destroy();
    this.ready = undefined;
  }
}
