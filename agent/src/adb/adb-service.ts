import { connect, type Socket } from "node:net";
import type { AdbServerAddress } from "./adb-client.js";

/**
 * Where a failed device service call stopped: "before" the request could
 * reach the device (not dispatched), "sent" after it left but before the
 * device accepted it (unknown), "accepted" after the device took it.
 */
export type ServicePhase = "before" | "sent" | "accepted";

export type ServiceErrorCode = "DEVICE_OFFLINE" | "DEADLINE_EXCEEDED" | "ADB_CONNECTION_LOST" | "ADB_REFUSED" | "OUTPUT_TOO_LARGE";

export class AdbServiceError extends Error {
  constructor(
    message: string,
    readonly phase: ServicePhase,
    readonly code: ServiceErrorCode,
  ) {
    super(message);
    this.name = "AdbServiceError";
  }
}

export interface OpenService {
  socket: Socket;
  /** Bytes that arrived with the final OKAY. */
  leftover: Buffer;
}

/**
 * Opens a device service through the adb server (host:transport:SERIAL,
 * then SERVICE) and resolves once the device accepted it. adbkit cannot be
 * used for this: it hides the phase at which a call failed and has no
 * deadline, both of which farm reports.
 */
export function openDeviceService(addr: AdbServerAddress, serial: string, service: string, signal?: AbortSignal): Promise<OpenService> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: addr.host, port: addr.port });
    socket.setNoDelay(true);
    let phase: ServicePhase = "before";
    let stage: "transport" | "service" = "transport";
    let buf: Buffer = Buffer.alloc(0);
    let done = false;
    const fail = (e: AdbServiceError) => {
      if (done) return;
      done = true;
      signal?.removeEventListener("abort", onAbort);
      socket.destroy();
      reject(e);
    };
    const onAbort = () => fail(new AdbServiceError("deadline exceeded", phase, "DEADLINE_EXCEEDED"));
    if (signal?.aborted) return onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
    const request = (text: string) => socket.write(text.length.toString(16).padStart(4, "0") + text);
    const onData = (chunk: Buffer) => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      while (!done && buf.length >= 4) {
        const status = buf.subarray(0, 4).toString("latin1");
        if (status === "FAIL") {
          if (buf.length < 8) return;
          const n = Number.parseInt(buf.subarray(4, 8).toString("latin1"), 16);
          if (buf.length < 8 + n) return;
          const msg = buf.subarray(8, 8 + n).toString("utf8");
          // A refusal by the server means the request never reached the device.
          return fail(new AdbServiceError(`adb: ${msg}`, "before", /offline|not found|no devices/i.test(msg) ? "DEVICE_OFFLINE" : "ADB_REFUSED"));
        }
        if (status !== "OKAY") return fail(new AdbServiceError(`unexpected adb reply ${JSON.stringify(status)}`, phase, "ADB_CONNECTION_LOST"));
        buf = buf.subarray(4);
        if (stage === "transport") {
          stage = "service";
          request(service);
          phase = "sent";
          continue;
        }
        done = true;
        socket.off("data", onData);
        socket.off("error", onError);
        socket.off("close", onClose);
        signal?.removeEventListener("abort", onAbort);
        return resolve({ socket, leftover: buf });
      }
    };
    const onError = (e: Error) => fail(new AdbServiceError(`adb server connection failed: ${e.message}`, phase, "ADB_CONNECTION_LOST"));
    const onClose = () => fail(new AdbServiceError("the adb server closed the connection", phase, "ADB_CONNECTION_LOST"));
    socket.once("connect", () => request(`host:transport:${serial}`));
    socket.on("data", onData);
    socket.on("error", onError);
    socket.on("close", onClose);
  });
}
