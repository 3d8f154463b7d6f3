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
  return talk(connect({ host: addr.host, port: addr.port }), { serial, service }, signal);
}

/**
 * A connection to the adb server with the phone's transport already
 * selected (host:transport:SERIAL answered OKAY), ready for one service:
 * openServiceOn sends it. Nothing is sent to the device until then.
 */
export function selectTransport(addr: AdbServerAddress, serial: string, signal?: AbortSignal): Promise<Socket> {
  return talk(connect({ host: addr.host, port: addr.port }), { serial }, signal).then((o) => o.socket);
}

/** Opens `service` on a connection selectTransport made: resolves once the device accepted it. */
export function openServiceOn(socket: Socket, service: string, signal?: AbortSignal): Promise<OpenService> {
  return talk(socket, { service }, signal);
}

/**
 * The adb server's side of a service request on `socket`: the transport
 * request when `serial` is given (on connect), then the service when given;
 * resolves after the last OKAY.
 */
function talk(socket: Socket, steps: { serial?: string; service?: string }, signal?: AbortSignal): Promise<OpenService> {
  return new Promise((resolve, reject) => {
    socket.setNoDelay(true);
    let phase: ServicePhase = "before";
    let stage: "transport" | "service" = steps.serial !== undefined ? "transport" : "service";
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
    const sendService = () => {
      request(steps.service as string);
      phase = "sent";
    };
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
        if (stage === "transport" && steps.service !== undefined) {
          stage = "service";
          sendService();
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
    if (steps.serial !== undefined) {
      const serial = steps.serial;
      socket.once("connect", () => request(`host:transport:${serial}`));
    } else if (socket.destroyed) {
      return onClose();
    } else {
      sendService();
    }
    socket.on("data", onData);
    socket.on("error", onError);
    socket.on("close", onClose);
  });
}
