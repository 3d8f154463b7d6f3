import type { Transport } from "@connectrpc/connect";
import { farmTransport } from "@farm/shared/farm-transport";

/**
 * One HTTP/2 connection to the coordinator for the control stream and
 * uploads; with `streamWindowBytes`, another connection whose streams get
 * that receive window (remote adb streams: ADB_STREAM_WINDOW_BYTES).
 */
export function coordinatorTransport(url: string, token: string, tls: { caFile?: string | undefined; insecure?: boolean | undefined; streamWindowBytes?: number } = {}): Transport {
  return farmTransport({
    url,
    token,
    caFile: tls.caFile,
    insecure: tls.insecure,
    ...(tls.streamWindowBytes ? { streamWindowBytes: tls.streamWindowBytes } : {}),
    // HTTP/2 pings notice a dead coordinator even when no heartbeat is due.
    pingIntervalMs: 10_000,
  });
}
