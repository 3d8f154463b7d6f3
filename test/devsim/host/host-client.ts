import { connect, type Socket } from "node:net";

/**
 * Minimal client for the adb server's smart-socket protocol (what the adb CLI
 * and adbkit speak to port 5037): request = 4 hex digits of length + text;
 * reply = OKAY or FAIL + hex4 length + message.
 */

export class AdbServerError extends Error {
  override name = "AdbServerError";
}

/** Buffered reads of exact byte counts from a socket. */
class SocketReader {
  private buffer = Buffer.alloc(0);
  private ended = false;
  private error: Error | undefined;
  private wake: (() => void) | undefined;

  constructor(socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.notify();
    });
    socket.on("end", () => {
      this.ended = true;
      this.notify();
    });
    socket.on("close", () => {
      this.ended = true;
      this.notify();
    });
    socket.on("error", (error) => {
      this.error = error;
      this.notify();
    });
  }

  /** Exactly n bytes, or undefined if the connection ended first. */
  async read(n: number): Promise<Buffer | undefined> {
    while (this.buffer.length < n) {
      if (this.error) throw this.error;
      if (this.ended) return undefined;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
    const out = this.buffer.subarray(0, n);
    this.buffer = this.buffer.subarray(n);
    return out;
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}

function encodeRequest(request: string): string {
  return Buffer.byteLength(request).toString(16).padStart(4, "0") + request;
}

async function openServer(port: number, host: string): Promise<Socket> {
  const socket = connect({ port, host });
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", () => {
      socket.off("error", reject);
      resolve();
    });
    socket.once("error", reject);
  });
  return socket;
}

async function readLengthPrefixed(reader: SocketReader): Promise<string | undefined> {
  const length = await reader.read(4);
  if (!length) return undefined;
  const body = await reader.read(parseInt(length.toString("ascii"), 16));
  return body?.toString("utf8");
}

async function readStatus(reader: SocketReader, request: string): Promise<void> {
  const status = (await reader.read(4))?.toString("ascii");
  if (status === "OKAY") return;
  if (status === "FAIL") throw new AdbServerError(`${request}: ${(await readLengthPrefixed(reader)) ?? "FAIL"}`);
  throw new AdbServerError(`${request}: unexpected reply ${JSON.stringify(status)}`);
}

/**
 * Sends one host request (e.g. `host:version`, `host:devices`) and returns
 * its length-prefixed reply; `host:kill` has none (returns '').
 */
export async function hostRequest(port: number, request: string, host = "127.0.0.1"): Promise<string> {
  const socket = await openServer(port, host);
  try {
    const reader = new SocketReader(socket);
    socket.write(encodeRequest(request));
    await readStatus(reader, request);
    return (await readLengthPrefixed(reader)) ?? "";
  } finally {
    socket.destroy();
  }
}

/** State of each adb transport, as `adb devices` lists it (serial → device|offline|unauthorized|…). */
export type DeviceList = Map<string, string>;

export function parseDeviceList(text: string): DeviceList {
  const devices: DeviceList = new Map();
  for (const line of text.split("\n")) {
    const [serial, state] = line.trim().split(/\s+/);
    if (serial && state) devices.set(serial, state);
  }
  return devices;
}

export interface DeviceTracker {
  close(): void;
  /** Resolves when tracking stopped (closed, or the server went away). */
  readonly done: Promise<void>;
}

/**
 * Follows `host:track-devices`: the server pushes the full device list on
 * every change (and once at the start), so callers can wait for states
 * without polling.
 */
export async function trackDevices(port: number, onUpdate: (devices: DeviceList) => void, host = "127.0.0.1"): Promise<DeviceTracker> {
  const socket = await openServer(port, host);
  const reader = new SocketReader(socket);
  socket.write(encodeRequest("host:track-devices"));
  try {
    await readStatus(reader, "host:track-devices");
  } catch (error) {
    socket.destroy();
    throw error;
  }
  const done = (async () => {
    try {
      for (let text = await readLengthPrefixed(reader); text !== undefined; text = await readLengthPrefixed(reader)) {
        onUpdate(parseDeviceList(text));
      }
    } catch {
      // Socket errors end tracking like a close does.
    }
  })();
  return { close: () => socket.destroy(), done };
}
