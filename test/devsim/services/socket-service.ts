import type { ServiceStream } from "../transport/adb-stream.js";
import type { Service } from "./service.js";

/**
 * `localabstract:`, `localreserved:`, `localfilesystem:`, `local:` and
 * `tcp:` — a raw pipe to a socket served on the device; refused (CLSE) when
 * nothing listens there, as adbd does.
 */
export const socketService: Service = {
  prefixes: ["localabstract:", "localreserved:", "localfilesystem:", "local:", "tcp:"],
  open(request) {
    const connector = request.device.state.sockets.resolve(request.name);
    if (!connector) return undefined;
    return (stream) => pipe(stream, connector());
  },
};

async function pipe(stream: ServiceStream, socket: import("node:net").Socket): Promise<void> {
  socket.setNoDelay(true);
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  socket.on("error", () => {});
  // Device socket → host: pause the socket while the adb stream is backed up.
  socket.on("data", (chunk: Buffer) => {
    socket.pause();
    void stream.write(chunk).then(() => socket.resume());
  });
  const onAbort = () => socket.destroy();
  stream.signal.addEventListener("abort", onAbort, { once: true });
  // Host → device socket.
  void (async () => {
    for (let chunk = await stream.read(); chunk; chunk = await stream.read()) {
      if (!socket.write(chunk)) await new Promise<void>((resolve) => socket.once("drain", resolve).once("close", resolve));
    }
    socket.end();
  })();
  await closed;
  stream.signal.removeEventListener("abort", onAbort);
}
