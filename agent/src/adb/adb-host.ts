import { connect } from "node:net";
import type { AdbServerAddress } from "./adb-client.js";

/**
 * One request to the adb server's host services (forward, list-forward,
 * killforward): the length-prefixed request, then everything the server
 * answers until it closes (statuses and payloads, read with okay()).
 */
function hostExchange(addr: AdbServerAddress, service: string, signal?: AbortSignal): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: addr.host, port: addr.port });
    let buf = Buffer.alloc(0);
    const done = (err?: Error) => {
      signal?.removeEventListener("abort", onAbort);
      socket.destroy();
      if (err) reject(err);
      else resolve(buf);
    };
    const onAbort = () => done(new Error(`adb host request ${service} timed out`));
    signal?.addEventListener("abort", onAbort, { once: true });
    socket.once("connect", () => socket.write(`${Buffer.byteLength(service).toString(16).padStart(4, "0")}${service}`));
    socket.on("data", (chunk: Buffer) => (buf = Buffer.concat([buf, chunk])));
    socket.once("error", (err) => done(err));
    socket.once("close", () => done());
  });
}

/** Reads "OKAY", or throws the FAIL message, at the start of buf; returns the rest. */
function okay(buf: Buffer, what: string): Buffer {
  const status = buf.subarray(0, 4).toString("latin1");
  if (status === "OKAY") return buf.subarray(4);
  if (status === "FAIL") {
    const len = Number.parseInt(buf.subarray(4, 8).toString("latin1"), 16);
    throw new Error(buf.subarray(8, 8 + len).toString("utf8") || `adb refused ${what}`);
  }
  throw new Error(`unexpected reply to ${what}`);
}

function protocolString(buf: Buffer): string {
  const len = Number.parseInt(buf.subarray(0, 4).toString("latin1"), 16);
  return buf.subarray(4, 4 + len).toString("utf8");
}

export interface Forward {
  serial: string;
  local: string;
  remote: string;
}

/** Every forward the adb server holds, for every device. */
export async function listForwards(addr: AdbServerAddress, signal?: AbortSignal): Promise<Forward[]> {
  const text = protocolString(okay(await hostExchange(addr, "host:list-forward", signal), "list-forward"));
  return text
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter((p) => p.length === 3)
    .map(([serial, local, remote]) => ({ serial: serial!, local: local!, remote: remote! }));
}

/** Creates `tcp:0 -> remote` on exactly this serial; returns the host port adb chose. */
export async function forwardToAnyPort(addr: AdbServerAddress, serial: string, remote: string, signal?: AbortSignal): Promise<number> {
  // On the host, the first OKAY accepts the transport and the second the forward.
  const rest = okay(okay(await hostExchange(addr, `host-serial:${serial}:forward:tcp:0;${remote}`, signal), "forward"), "forward");
  const port = Number(protocolString(rest));
  if (!Number.isInteger(port) || port <= 0) throw new Error("adb did not report the forwarded port");
  return port;
}

/** Removes the forward on tcp:PORT of this serial. */
export async function killForward(addr: AdbServerAddress, serial: string, port: number, signal?: AbortSignal): Promise<void> {
  okay(okay(await hostExchange(addr, `host-serial:${serial}:killforward:tcp:${port}`, signal), "killforward"), "killforward");
}
