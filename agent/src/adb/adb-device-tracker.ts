import { connect, type Socket } from "node:net";
import { EventEmitter } from "node:events";
import type { AdbServerAddress } from "./adb-client.js";

export interface AdbDeviceEntry {
  serial: string;
  state: string;
}

/**
 * host:track-devices on the adb server. adb pushes the *complete* device list
 * on every change, so each "list" event can be reconciled as a whole; no diff
 * is lost if a listener attaches late (which adbkit's Tracker allows).
 *
 * Events: "list" (AdbDeviceEntry[]), "end" (Error | undefined).
 */
export class AdbDeviceTracker extends EventEmitter {
  private socket: Socket | undefined;
  private buffer: Buffer = Buffer.alloc(0);
  private stage: "status" | "fail-length" | "fail-message" | "length" | "payload" = "status";
  private need = 4;
  private ended = false;

  start(addr: AdbServerAddress): this {
    const socket = connect({ host: addr.host, port: addr.port });
    this.socket = socket;
    socket.setNoDelay(true);
    socket.once("connect", () => {
      const request = "host:track-devices";
      socket.write(request.length.toString(16).padStart(4, "0") + request);
    });
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.once("error", (err) => this.finish(err));
    socket.once("close", () => this.finish(new Error("adb server closed the tracking connection")));
    return this;
  }

  stop(): void {
    this.ended = true;
    this.socket?.destroy();
  }

  private finish(err: Error | undefined): void {
    if (this.ended) return;
    this.ended = true;
    this.socket?.destroy();
    this.emit("end", err);
  }

  private onData(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    while (!this.ended && this.buffer.length >= this.need) {
      const part = this.buffer.subarray(0, this.need);
      this.buffer = this.buffer.subarray(this.need);
      this.step(part.toString("utf8"));
    }
  }

  private step(text: string): void {
    switch (this.stage) {
      case "status":
        if (text === "OKAY") [this.stage, this.need] = ["length", 4];
        else if (text === "FAIL") [this.stage, this.need] = ["fail-length", 4];
        else this.finish(new Error(`unexpected adb server reply "${text}"`));
        return;
      case "fail-length":
        [this.stage, this.need] = ["fail-message", Number.parseInt(text, 16)];
        if (this.need === 0) this.finish(new Error("adb server refused host:track-devices"));
        return;
      case "fail-message":
        this.finish(new Error(`adb server refused host:track-devices: ${text}`));
        return;
      case "length": {
        const n = Number.parseInt(text, 16);
        if (!Number.isFinite(n)) return this.finish(new Error(`bad length "${text}" from adb server`));
        if (n === 0) this.emit("list", []);
        else [this.stage, this.need] = ["payload", n];
        return;
      }
      case "payload":
        [this.stage, this.need] = ["length", 4];
        this.emit("list", parseDeviceList(text));
        return;
    }
  }
}

/** Parses `serial\tstate` lines as adb's host:devices and track-devices send them. */
export function parseDeviceList(text: string): AdbDeviceEntry[] {
  const out: AdbDeviceEntry[] = [];
  for (const line of text.split("\n")) {
    const tab = line.indexOf("\t");
    if (tab <= 0) continue;
    out.push({ serial: line.slice(0, tab), state: line.slice(tab + 1).trim() });
  }
  return out;
}
