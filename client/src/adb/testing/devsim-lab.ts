import { connect, type Socket } from "node:net";

/**
 * Test harness: devsim (test/devsim) and a bridge that opens a device
 * service through an adb server, standing in for the coordinator and agent.
 */

export interface AdbResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface AdbServerHandle {
  port: number;
  stop(): Promise<void>;
}

/** The parts of test/devsim's API these tests use. */
export interface DevsimApi {
  startAdbServer(): Promise<AdbServerHandle>;
  startDevsim(o: { devices: number; adbPort: number }): Promise<{ devices: { serial: string; device: { model: string } }[]; stop(): Promise<void> }>;
  runAdb(port: number, args: readonly string[], o?: { timeoutMs?: number; input?: string; env?: NodeJS.ProcessEnv }): Promise<AdbResult>;
  waitForDeviceState(port: number, serial: string, wanted: "device" | "gone" | ((state: string | undefined) => boolean), o?: { timeoutMs?: number }): Promise<string | undefined>;
  buildSimApk(manifest: { name: string }): Buffer;
}

/** test/ builds after cli/ (it references it), so devsim is loaded by path at run time (vitest runs its TypeScript), not compiled in. */
export async function loadDevsim(): Promise<DevsimApi> {
  return (await import(new URL("../../../../test/devsim/index.ts", import.meta.url).href)) as DevsimApi;
}

/** Reads exactly n bytes from a paused socket. */
async function readExactly(socket: Socket, n: number): Promise<Buffer> {
  for (;;) {
    const b = socket.read(n) as Buffer | null;
    if (b) return b;
    if (socket.readableEnded || socket.destroyed) throw new Error("adb server closed the connection");
    await new Promise<void>((resolve, reject) => {
      const done = () => {
        socket.off("readable", done);
        socket.off("close", done);
        socket.off("error", reject);
        resolve();
      };
      socket.once("readable", done);
      socket.once("close", done);
      socket.once("error", reject);
    });
  }
}

/** adb's smart-socket request: 4 hex digits of length, then the text. */
const request = (text: string) => Buffer.from(`${text.length.toString(16).padStart(4, "0")}${text}`);

async function expectOkay(socket: Socket): Promise<void> {
  const status = (await readExactly(socket, 4)).toString("latin1");
  if (status === "OKAY") return;
  const length = Number.parseInt((await readExactly(socket, 4)).toString("latin1"), 16);
  throw new Error((await readExactly(socket, length)).toString("utf8"));
}

/**
 * One service on a phone through an adb server (host:transport:SERIAL,
 * then the service), as the agent opens it: resolves to the raw stream
 * once the phone accepted it, rejects with the server's FAIL text.
 */
export async function openThroughAdbServer(adbPort: number, serial: string, service: string): Promise<Socket> {
  const socket = connect({ host: "127.0.0.1", port: adbPort, noDelay: true });
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  socket.pause();
  try {
    socket.write(request(`host:transport:${serial}`));
    await expectOkay(socket);
    socket.write(request(service));
    await expectOkay(socket);
  } catch (err) {
    socket.destroy();
    throw err;
  }
  return socket;
}
