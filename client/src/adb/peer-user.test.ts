import { createServer, connect, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { isSameUserPeer, loopbackPeerUid } from "./peer-user.js";

const table = (rows: string[]) => ["  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode", ...rows].join("\n");

describe("loopbackPeerUid", () => {
  const socket = { remotePort: 0xa1b2, localPort: 0x9c40 } as Socket;

  it("reads the uid of the peer's row: its local port is the peer's, its remote port ours", () => {
    const proc = table([
      "   0: 0100007F:9C40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0",
      "   1: 0100007F:9C40 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000  1000        0 2 1 0000000000000000 20 4 30 10 -1",
      "   2: 0100007F:A1B2 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1001        0 3 1 0000000000000000 20 4 30 10 -1",
    ]);
    expect(loopbackPeerUid(socket, proc)).toBe(1001);
  });

  it("is undefined without procfs or a matching row", () => {
    expect(loopbackPeerUid(socket, undefined)).toBeUndefined();
    expect(loopbackPeerUid(socket, table([]))).toBeUndefined();
  });

  it("lets this user's own connection in", async () => {
    const accepted = new Promise<[boolean, number | undefined]>((resolve) => {
      const server = createServer((s) => {
        resolve([isSameUserPeer(s), loopbackPeerUid(s)]);
        s.destroy();
        server.close();
      });
      server.listen(0, "127.0.0.1", () => {
        const address = server.address();
        connect({ host: "127.0.0.1", port: address && typeof address === "object" ? address.port : 0 }).on("error", () => undefined);
      });
    });
    const [same, uid] = await accepted;
    expect(same).toBe(true);
    // With procfs, the owner was actually found (not let in for want of knowing).
    if (process.platform === "linux") expect(uid).toBe(process.getuid?.());
  });
});
