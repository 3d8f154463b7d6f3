import { toErrorReport } from "@farm/shared/errors";
import { tunnelMessage } from "../adb-tunnels/tunnel-message.js";
import type { TunnelEntry, Tunnels } from "../adb-tunnels/tunnels.js";
import type { WatchHub } from "./watch-hub.js";
import { whileWatched } from "./watch-wiring.js";

/**
 * Remote adb tunnels on the watch stream: opened and changed (the whole
 * tunnel), closed (its key and why). Tunnels live in this replica's memory,
 * so only its own watchers hear of them. Listened to only while someone
 * watches: with no listener, Tunnels.touched() does nothing per chunk.
 */
export function watchTunnels(hub: WatchHub, tunnels: Tunnels): void {
  whileWatched(hub, () => {
    const onTunnel = (t: TunnelEntry) => hub.publish({ case: "tunnel", value: tunnelMessage(t) });
    const onClosed = (t: TunnelEntry, reason: Error) => hub.publish({ case: "tunnelClosed", value: { tunnelId: t.tunnelId, physicalId: t.physicalId, reason: toErrorReport(reason).message } });
    tunnels.events.on("opened", onTunnel).on("updated", onTunnel).on("closed", onClosed);
    return () => void tunnels.events.off("opened", onTunnel).off("updated", onTunnel).off("closed", onClosed);
  });
}
