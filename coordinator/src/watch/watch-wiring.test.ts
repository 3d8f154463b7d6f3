import { afterEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { AgentHelloSchema, DeviceReportSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { WatchResponse } from "@farm/shared/gen/farm/v1/watch_service_pb";
import { createLogger } from "@farm/shared/log";
import { ActivityLog } from "../activity/activity-log.js";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { DeviceLabels } from "../devices/device-labels.js";
import { EvidenceStore } from "../evidence/evidence-store.js";
import { LeaseManager } from "../leases/lease-manager.js";
import { SqliteLeaseStore } from "../leases/sqlite-lease-store.js";
import { Registry } from "../registry/registry.js";
import { SqliteRegistryStore } from "../registry/sqlite-registry-store.js";
import { VideoSessionIndex } from "../video/video-session-index.js";
import { SqliteVideoSessionStore } from "../video/sqlite-video-session-store.js";
import { Sessions } from "../sessions/sessions.js";
import { SessionSteps } from "../sessions/session-steps.js";
import { SqliteSessionStepStore } from "../sessions/sqlite-session-step-store.js";
import { WatchHub } from "./watch-hub.js";
import { wireWatchHub } from "./watch-wiring.js";
import { sqliteDatabaseOf } from "../db/database.js";
import { createActivityStore, createDeviceLabelStore, createEvidenceIndexStore, createSessionStore } from "../db/stores.js";

let opened: OpenedDatabase | undefined;

afterEach(() => {
  opened?.close();
  opened = undefined;
});

async function wired() {
  opened = openDatabase(":memory:");
  const db = opened.db;
  const registry = await Registry.open(new SqliteRegistryStore(db), { heartbeatMisses: 3 });
  const labels = await DeviceLabels.open(createDeviceLabelStore(sqliteDatabaseOf(db)));
  const leases = await LeaseManager.open(new SqliteLeaseStore(db), registry, labels, createLogger({ level: "error" }));
  const hub = new WatchHub();
  const sessions = new Sessions(createSessionStore(sqliteDatabaseOf(db)));
  const activity = new ActivityLog(createActivityStore(sqliteDatabaseOf(db)));
  // Nothing here touches the evidence directory.
  wireWatchHub(hub, {
    registry,
    leases,
    labels,
    activity,
    evidence: new EvidenceStore(createEvidenceIndexStore(sqliteDatabaseOf(db)), "/nonexistent"),
    videos: new VideoSessionIndex(new SqliteVideoSessionStore(db)),
    sessions,
    steps: new SessionSteps(new SqliteSessionStepStore(db)),
    log: createLogger({ level: "error" }),
  });
  return { registry, leases, labels, hub, sessions, activity };
}

const listening = (r: Registry) => (["agent", "device", "deviceRemoved"] as const).map((e) => r.events.listenerCount(e));

describe("watch wiring", () => {
  it("listens to the registry only while the hub has watchers, and forwards what it hears", async () => {
    const { registry, labels, hub, sessions } = await wired();
    expect(listening(registry)).toEqual([0, 0, 0]);
    expect(labels.events.listenerCount("changed")).toBe(0);
    expect(sessions.events.listenerCount("session")).toBe(0);

    const ac = new AbortController();
    const watch = hub.subscribe(ac.signal);
    expect((await watch.next()).value?.kind.case).toBe("ready");
    expect(listening(registry)).toEqual([1, 1, 1]);

    await registry.attach(create(AgentHelloSchema, { agentId: "a-1", name: "lab-1", hostname: "h", protocolVersion: 2, heartbeatIntervalMs: 1000 }), { terminate: () => undefined });
    await registry.upsertDevice("a-1", create(DeviceReportSchema, { serial: "S-1", state: "device", properties: { physicalId: "pd-1", identityStatus: "ok" } }));
    await labels.set("pd-1", { rack: "b2" });
    await sessions.start("alice", { leaseId: "l-1", physicalId: "pd-1", agentId: "a-1", serial: "S-1" }, { name: "smoke", context: {}, ocr: false });
    const got: WatchResponse[] = [];
    for (let i = 0; i < 4; i++) got.push((await watch.next()).value as WatchResponse);
    expect(got.map((m) => m.kind.case)).toEqual(["agent", "device", "labels", "session"]);
    expect(got[3]?.kind.case === "session" && got[3].kind.value).toMatchObject({ name: "smoke", owner: "alice", agentName: "lab-1", serial: "S-1" });

    ac.abort();
    expect((await watch.next()).done).toBe(true);
    expect(listening(registry)).toEqual([0, 0, 0]);
    expect(labels.events.listenerCount("changed")).toBe(0);
    expect(sessions.events.listenerCount("session")).toBe(0);
  });

  it("builds activity messages only while the hub has watchers (every routed call writes an entry)", async () => {
    const { hub, activity } = await wired();
    const entry = { caller: "alice", leaseId: "l-1", serial: "S-1", physicalId: "pd-1", agentId: "a-1", command: "runShell", requestId: "", detail: "echo hi", outcome: "ok", durationMs: 3 };
    expect(activity.listenerCount).toBe(0);
    await activity.record({ ...entry, at: 1 });

    const ac = new AbortController();
    const watch = hub.subscribe(ac.signal);
    expect((await watch.next()).value?.kind.case).toBe("ready");
    expect(activity.listenerCount).toBe(1);
    await activity.record({ ...entry, at: 2 });
    const got = (await watch.next()).value as WatchResponse;
    // The entry written while watched, not the one before.
    expect(got.kind.case === "activity" && got.kind.value).toMatchObject({ caller: "alice", serial: "S-1", command: "runShell", outcome: "ok" });
    expect(got.kind.case === "activity" && got.kind.value.time && timestampMs(got.kind.value.time)).toBe(2);

    ac.abort();
    expect((await watch.next()).done).toBe(true);
    expect(activity.listenerCount).toBe(0);
  });
});
