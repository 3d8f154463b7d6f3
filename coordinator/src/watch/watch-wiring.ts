import { EventEmitter } from "node:events";
import type { Agent, Device } from "@farm/shared/gen/farm/v1/registry_pb";
import type { Logger } from "@farm/shared/log";
import type { ActivityLog, ActivityRow } from "../activity/activity-log.js";
import type { DeviceLabels } from "../devices/device-labels.js";
import type { EvidenceRow, EvidenceStore } from "../evidence/evidence-store.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { LeaseRow, Waiter } from "../leases/lease-store.js";
import { activityMessage, evidenceMessage, leaseMessage, sessionMessage, videoSessionMessage, waiterMessage } from "./messages.js";
import type { Registry } from "../registry/registry.js";
import type { Sessions } from "../sessions/sessions.js";
import type { SessionSteps, StoredStep } from "../sessions/session-steps.js";
import { stepMessage } from "../sessions/step-message.js";
import type { SessionRow } from "../sessions/session-store.js";
import type { VideoSessionIndex, VideoSessionRow } from "../video/video-session-index.js";
import type { WatchHub } from "./watch-hub.js";

export interface WatchSources {
  registry: Registry;
  leases: LeaseManager;
  labels: DeviceLabels;
  activity: ActivityLog;
  evidence: EvidenceStore;
  videos: VideoSessionIndex;
  sessions: Sessions;
  steps: SessionSteps;
  /** For what a source's event handler fails to do. */
  log: Logger;
}

/** One change as the hub sends it. */
export type WatchKind = Parameters<WatchHub["publish"]>[0];

/**
 * Changes of the sources whose one hook the wiring holds, as stored: for
 * telling the other replicas' watchers (remote-watch.ts). The other sources
 * have events of their own.
 */
export interface StoredEvents {
  evidence: [row: EvidenceRow];
  video: [row: VideoSessionRow];
}

export interface WatchWiring {
  /** Told of every change whether or not anyone here watches (another replica's watchers may). */
  readonly stored: EventEmitter<StoredEvents>;
}

/** The wire form of each watched row: one place, so a change made on another replica reaches watchers exactly as a local one. */
export function watchMessages(src: Pick<WatchSources, "registry" | "evidence">) {
  const agentName = (id: string) => src.registry.agentName(id) ?? "";
  return {
    activity: (row: ActivityRow): WatchKind => ({ case: "activity", value: activityMessage(row) }),
    evidence: (row: EvidenceRow): WatchKind => ({ case: "evidence", value: evidenceMessage(row, agentName(row.agentId)) }),
    session: (row: SessionRow): WatchKind => ({ case: "session", value: sessionMessage(row, agentName(row.agentId)) }),
    step: (step: StoredStep): WatchKind => ({ case: "sessionStep", value: stepMessage(step) }),
    /** Whether a session's bundle is stored is read from the index. */
    video: async (row: VideoSessionRow): Promise<WatchKind> => ({ case: "videoSession", value: videoSessionMessage(row, agentName(row.agentId), await src.evidence.has(row.sessionId)) }),
  };
}

/** Connects every source of change to the hub, in the wire form the list RPCs use. */
export function wireWatchHub(hub: WatchHub, src: WatchSources): WatchWiring {
  const agentName = (id: string) => src.registry.agentName(id) ?? "";
  const messages = watchMessages(src);
  const stored = new EventEmitter<StoredEvents>();
  // Sources build their events only while someone listens (attach and
  // heartbeats are hot paths): listen to them only while someone watches.
  whileWatched(hub, () => {
    const onAgent = (agent: Agent) => hub.publish({ case: "agent", value: agent });
    const onDevice = (device: Device) => hub.publish({ case: "device", value: device });
    const onDeviceRemoved = (agentId: string, serial: string) => hub.publish({ case: "deviceRemoved", value: { agentId, serial } });
    const onLease = (lease: LeaseRow) => hub.publish({ case: "lease", value: leaseMessage(lease, agentName(lease.agentId)) });
    const onLeaseEnded = (lease: LeaseRow) => hub.publish({ case: "leaseEnded", value: { leaseId: lease.leaseId, physicalId: lease.physicalId, reason: lease.state } });
    const onQueue = (waiters: Waiter[]) => hub.publish({ case: "queue", value: { waiters: waiters.map(waiterMessage) } });
    const onLabels = (physicalId: string, labels: Record<string, string>) => hub.publish({ case: "labels", value: { physicalId, labels } });
    const onSession = (session: SessionRow) => hub.publish(messages.session(session));
    src.registry.events.on("agent", onAgent).on("device", onDevice).on("deviceRemoved", onDeviceRemoved);
    src.leases.events.on("lease", onLease).on("leaseEnded", onLeaseEnded).on("queue", onQueue);
    src.labels.events.on("changed", onLabels);
    const onStep = (step: StoredStep) => hub.publish(messages.step(step));
    // Every routed call writes an activity entry: its watch message is built only while someone watches.
    const onActivity = (row: ActivityRow) => hub.publish(messages.activity(row));
    src.sessions.events.on("session", onSession);
    src.steps.events.on("step", onStep);
    src.activity.onRecord(onActivity);
    return () => {
      src.activity.offRecord(onActivity);
      src.steps.events.off("step", onStep);
      src.registry.events.off("agent", onAgent).off("device", onDevice).off("deviceRemoved", onDeviceRemoved);
      src.leases.events.off("lease", onLease).off("leaseEnded", onLeaseEnded).off("queue", onQueue);
      src.labels.events.off("changed", onLabels);
      src.sessions.events.off("session", onSession);
    };
  });
  src.evidence.onPublish = (row) => {
    hub.publish(messages.evidence(row));
    stored.emit("evidence", row);
    // A stored video bundle is its session's final word, also when nobody
    // asked (the device's time limit ended it): the index takes it over.
    const settle = async () => {
      const session = await src.videos.get(row.evidenceId);
      if (session) await src.videos.settleFromBundle(session, src.evidence);
    };
    void settle().catch((err: unknown) => src.log.error("could not settle a video session from its stored bundle; its status says what the agent last reported", { sessionId: row.evidenceId, error: (err as Error).message }));
  };
  // Whether a session's bundle is stored is read from the index: one chain, so watchers see a session's changes in the order they were stored.
  let videoEvents: Promise<void> = Promise.resolve();
  src.videos.onUpsert = (row) => {
    stored.emit("video", row);
    videoEvents = videoEvents
      .then(async () => hub.publish(await messages.video(row)))
      .catch((err: unknown) => src.log.warn("could not tell watchers of a video session change", { sessionId: row.sessionId, status: row.status, error: (err as Error).message }));
  };
  return { stored };
}

/** Runs `listen` when the hub gets its first watcher, and what it returns when the last one leaves. */
export function whileWatched(hub: WatchHub, listen: () => () => void): void {
  let unlisten: (() => void) | undefined;
  if (hub.size > 0) unlisten = listen();
  hub.events.on("watchers", (count) => {
    if (count > 0 && !unlisten) unlisten = listen();
    else if (count === 0 && unlisten) {
      unlisten();
      unlisten = undefined;
    }
  });
}
