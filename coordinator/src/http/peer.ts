import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { createContextKey } from "@connectrpc/connect";
import { isLoopbackAddress } from "@farm/shared/transport-security";

/** How a request reached the coordinator. */
export type Peer = "tls" | "loopback" | "cleartext";

export const peerKey = createContextKey<Peer>("cleartext", { description: "transport of the request" });

export function peerOf(req: IncomingMessage | Http2ServerRequest): Peer {
  const socket = req.socket as { encrypted?: boolean; remoteAddress?: string };
  if (socket.encrypted === true) return "tls";
  return isLoopbackAddress(socket.remoteAddress) ? "loopback" : "cleartext";
}
