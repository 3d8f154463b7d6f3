import { connect } from "node:net";
import type { AdbServerAddress } from "./adb-client.js";

/** True when something accepts TCP connections at the adb server address. */
export function adbServerListening(addr: AdbServerAddress, timeoutMs = 2_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: addr.host, port: addr.port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}
