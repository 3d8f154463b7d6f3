import type { ClientSessionOptions, Http2Session, SecureClientSessionOptions } from "node:http2";
import { Http2SessionManager, type Http2SessionOptions } from "@connectrpc/connect-node";

/**
 * HTTP/2 flow-control windows. Node keeps both at the protocol's 64 KiB
 * default, so a sender may have only 64 KiB in flight per stream and per
 * connection: a byte stream (a push through remote adb, an evidence
 * download) then moves one window per round trip, whatever the link can do.
 * A receiver may hold up to a window of unread bytes, so these also bound
 * what a slow reader costs in memory.
 */
export const STREAM_WINDOW_BYTES = 4 * 1024 * 1024;
/**
 * The per-stream window of remote adb streams, on connections of their own:
 * a stalled adb stream (a phone that reads nothing) holds at most this much
 * in its receiver, so 48 of them cost 24 MiB rather than 192. 256 KiB cost
 * a push through a tunnel about a fifth of its speed on loopback
 * (test/bench/adb-tunnel.ts); 512 KiB about a tenth.
 */
export const ADB_STREAM_WINDOW_BYTES = 512 * 1024;
/** Shared by every stream of one connection (an agent's streams all share its one). */
export const CONNECTION_WINDOW_BYTES = 16 * 1024 * 1024;

/** Raises a session's connection-level receive window; a no-op once done. */
export function widenConnectionWindow(session: Http2Session): void {
  if (session.destroyed) return;
  if ((session.state.localWindowSize ?? 0) >= CONNECTION_WINDOW_BYTES) return;
  try {
    session.setLocalWindowSize(CONNECTION_WINDOW_BYTES);
  } catch {
    // The session is closing: nothing to widen.
  }
}

/**
 * Connect's session manager, with each session's connection window raised
 * on its first request (there is no other hook for a client session: the
 * per-stream window is a setting, the connection's is not).
 */
export class WideWindowSessionManager extends Http2SessionManager {
  /** Sessions already widened: reading a session's state (to check) builds an object of a dozen fields per request otherwise. */
  readonly #widened = new WeakSet<Http2Session>();

  override async request(...args: Parameters<Http2SessionManager["request"]>): ReturnType<Http2SessionManager["request"]> {
    const stream = await super.request(...args);
    const session = stream.session;
    if (session && !this.#widened.has(session)) {
      widenConnectionWindow(session);
      this.#widened.add(session);
    }
    return stream;
  }
}

/** The session manager for a client transport: wide windows on every connection it opens (per stream: `streamWindow`). */
export function wideWindowSessions(baseUrl: string, ping: Http2SessionOptions, nodeOptions: ClientSessionOptions | SecureClientSessionOptions, streamWindow = STREAM_WINDOW_BYTES): Http2SessionManager {
  return new WideWindowSessionManager(baseUrl, ping, { ...nodeOptions, settings: { ...nodeOptions.settings, initialWindowSize: streamWindow } });
}
