import type { Transport } from "@connectrpc/connect";
import { farmTransport } from "@farm/shared/farm-transport";

/** One HTTP/2 connection to the coordinator for the control stream and uploads. */
export function coordinatorTransport(url: string, token: string, tls: { caFile?: string | undefined; insecure?: boolean | undefined } = {}): Transport {
  return farmTransport({
    url,
    token,
    caFile: tls.caFile,
    insecure: tls.insecure,
    // HTTP/2 pings notice a dead coordinator even when no heartbeat is due.
    pingIntervalMs: 10_000,
  });
}
