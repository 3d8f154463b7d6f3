import { readFileSync } from "node:fs";
import type { Socket } from "node:net";

/**
 * The uid owning the other end of a loopback TCP connection, from
 * /proc/net/tcp (Linux): the row whose local port is the peer's port and
 * whose remote port is ours. undefined where that cannot be told (no
 * procfs, IPv6, the row already gone).
 */
export function loopbackPeerUid(socket: Socket, procNetTcp = readProcNetTcp()): number | undefined {
  if (procNetTcp === undefined || socket.remotePort === undefined || socket.localPort === undefined) return undefined;
  const hexPort = (p: number) => p.toString(16).toUpperCase().padStart(4, "0");
  const peer = hexPort(socket.remotePort);
  const ours = hexPort(socket.localPort);
  for (const line of procNetTcp.split("\n").slice(1)) {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
    const f = line.trim().split(/\s+/);
    if (f.length < 8) continue;
    if (f[1]?.split(":")[1] === peer && f[2]?.split(":")[1] === ours) {
      const uid = Number(f[7]);
      return Number.isInteger(uid) ? uid : undefined;
    }
  }
  return undefined;
}

function readProcNetTcp(): string | undefined {
  try {
    return readFileSync("/proc/net/tcp", "utf8");
  } catch {
    return undefined;
  }
}

/**
 * Only this user's adb server (or root's) may use the endpoint: it listens
 * on 127.0.0.1, which every account on a shared machine can reach, and it
 * asks for no key. Where the owner cannot be told, the connection is let in.
 */
export function isSameUserPeer(socket: Socket): boolean {
  const me = process.getuid?.();
  if (me === undefined) return true;
  const peer = loopbackPeerUid(socket);
  return peer === undefined || peer === me || peer === 0;
}
