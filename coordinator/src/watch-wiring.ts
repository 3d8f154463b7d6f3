import type { ActivityLog } from "./activity-log.js";
import type { EvidenceStore } from "./evidence-store.js";
import type { LeaseManager } from "./lease-manager.js";
import { activityMessage, evidenceMessage, leaseMessage, videoSessionMessage, waiterMessage } from "./messages.js";
import type { Registry } from "./registry.js";
import type { VideoSessionIndex } from "./video-session-index.js";
import type { WatchHub } from "./watch-hub.js";

/** Connects every source of change to the hub, in the wire form the list RPCs use. */
export function wireWatchHub(hub: WatchHub, src: { registry: Registry; leases: LeaseManager; activity: ActivityLog; evidence: EvidenceStore; videos: VideoSessionIndex }): void {
  const agentName = (id: string) => src.registry.agentName(id) ?? "";
  src.registry.watched = () => hub.size > 0;
  src.registry.onEvent = (e) => {
    if (e.kind === "device") hub.publish({ case: "device", value: e.device });
    else if (e.kind === "deviceRemoved") hub.publish({ case: "deviceRemoved", value: { agentId: e.agentId, serial: e.serial } });
    else hub.publish({ case: "agent", value: e.agent });
  };
  src.leases.onEvent = (e) => {
    switch (e.kind) {
      case "lease":
        return hub.publish({ case: "lease", value: leaseMessage(e.lease, agentName(e.lease.agentId)) });
      case "leaseEnded":
        return hub.publish({ case: "leaseEnded", value: { leaseId: e.lease.leaseId, physicalId: e.lease.physicalId, reason: e.lease.state } });
      case "queue":
        return hub.publish({ case: "queue", value: { waiters: e.waiters.map(waiterMessage) } });
      case "labels":
        return hub.publish({ case: "labels", value: { physicalId: e.physicalId, labels: e.labels } });
    }
  };
  src.activity.onRecord((row) => hub.publish({ case: "activity", value: activityMessage(row) }));
  src.evidence.onPublish = (row) => {
    hub.publish({ case: "evidence", value: evidenceMessage(row, agentName(row.agentId)) });
    // A stored video bundle is its session's final word, also when nobody
    // asked (the device's time limit ended it): the index takes it over.
    const session = src.videos.get(row.evidenceId);
    if (session) void src.videos.settleFromBundle(session, src.evidence);
  };
  src.videos.onUpsert = (row) => hub.publish({ case: "videoSession", value: videoSessionMessage(row, agentName(row.agentId), src.evidence.get(row.sessionId) !== undefined) });
}
