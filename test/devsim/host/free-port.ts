import { createServer } from "node:net";
import { isReservedPort } from "../transport/port-rules.js";

/**
 * A currently free loopback TCP port outside the adb-reserved ones (5037 and
 * the emulator range). Free at the time of the call only: callers that bind
 * later must handle EADDRINUSE.
 */
export async function findFreePort(host = "127.0.0.1"): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once("error", reject);
      server.listen({ host, port: 0, exclusive: true }, () => {
        const address = server.address();
        const bound = address && typeof address === "object" ? address.port : 0;
        server.close(() => resolve(bound));
      });
    });
    if (port !== 0 && !isReservedPort(port)) return port;
  }
  throw new Error("no free port outside the adb-reserved ranges");
}
