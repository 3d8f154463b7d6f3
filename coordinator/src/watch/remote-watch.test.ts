import { EventEmitter } from "node:events";
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { WatchResponse } from "@farm/shared/gen/farm/v1/watch_service_pb";
import { createLogger } from "@farm/shared/log";
import { ActivityLog } from "../activity/activity-log.js";
import { openDatabase, type CoordinatorDb, type OpenedDatabase } from "../db/open-database.js";
import { DeviceLabels } from "../devices/device-labels.js";
import { EvidenceStore, type EvidenceRow } from "../evidence/evidence-store.js";
import { LeaseManager } from "../leases/lease-manager.js";
import { SqliteLeaseStore } from "../leases/sqlite-lease-store.js";
import { Registry } from "../registry/registry.js";
import { SqliteRegistryStore } from "../registry/sqlite-registry-store.js";
import type { Change, ChangeBus, ChangeKind } from "../replicas/change-bus.js";
import { Sessions } from "../sessions/sessions.js";
import { SessionSteps } from "../sessions/session-steps.js";
import { SqliteSessionStepStore } from "../sessions/sqlite-session-step-store.js";
import type { StepRecordV2 } from "../sessions/step-record.js";
import { SqliteVideoSessionStore } from "../video/sqlite-video-session-store.js";
import { VideoSessionIndex, type VideoSessionRow } from "../video/video-session-index.js";
import { parseStepNoticeId, shareWatchChanges, stepNoticeId } from "./remote-watch.js";
import { WatchHub } from "./watch-hub.js";
import { wireWatchHub } from "./watch-wiring.js";
import { sqliteDatabaseOf } from "../db/database.js";
import { createActivityStore, createDeviceLabelStore, createEvidenceIndexStore, createSessionStore } from "../db/stores.js";

/** Replicas' notices in memory: delivered to the others in the order sent, never to the sender. */
class MemoryBus implements ChangeBus {
  readonly events = new EventEmitter<{ change: [change: Change]; resync: [] }>();
  readonly sent: [ChangeKind, string][] = [];
  readonly peers: MemoryBus[] = [];

  constructor(private readonly id: string) {}

  async publish(kind: ChangeKind, id: string): Promise<void> {
    this.sent.push([kind, id]);
    for (const p of this.peers) setImmediate(() => p.events.emit("change", { kind, id, from: this.id }));
  }

  async close(): Promise<void> {}
}

let opened: OpenedDatabase | undefined;
afterEach(() => {
  opened?.close();
  opened = undefined;
});

const log = createLogger({ level: "error" });

/** One coordinator on the shared database, its hub wired and shared over its bus. */
async function replica(db: CoordinatorDb, bus: MemoryBus) {
  const registry = await Registry.open(new SqliteRegistryStore(db), { heartbeatMisses: 3 });
  const labels = await DeviceLabels.open(createDeviceLabelStore(sqliteDatabaseOf(db)));
  const leases = await LeaseManager.open(new SqliteLeaseStore(db), registry, labels, log);
  const activityStore = createActivityStore(sqliteDatabaseOf(db));
  const src = {
    registry,
    leases,
    labels,
    activity: new ActivityLog(activityStore),
    // Nothing here touches the evidence directory.
    evidence: new EvidenceStore(createEvidenceIndexStore(sqliteDatabaseOf(db)), "/nonexistent"),
    videos: new VideoSessionIndex(new SqliteVideoSessionStore(db)),
    sessions: new Sessions(createSessionStore(sqliteDatabaseOf(db))),
    steps: new SessionSteps(new SqliteSessionStepStore(db)),
    log,
  };
  const hub = new WatchHub();
  const wiring = wireWatchHub(hub, src);
  shareWatchChanges(hub, src, wiring, bus);
  return { ...src, hub, wiring, bus, activityStore, evidenceIndex: createEvidenceIndexStore(sqliteDatabaseOf(db)) };
}

async function pair() {
  opened = openDatabase(":memory:");
  const busA = new MemoryBus("A");
  const busB = new MemoryBus("B");
  busA.peers.push(busB);
  busB.peers.push(busA);
  return { a: await replica(opened.db, busA), b: await replica(opened.db, busB) };
}

/** A watcher's messages, `ready` dropped. */
function watcher(hub: WatchHub) {
  const ac = new AbortController();
  const got: WatchResponse[] = [];
  const stream = hub.subscribe(ac.signal);
  let waiting: (() => void) | undefined;
  const pump = (async () => {
    for await (const m of stream) {
      if (m.kind.case !== "ready" && m.kind.case !== "keepalive") got.push(m);
      waiting?.();
    }
  })();
  return {
    got,
    /** Resolves once `n` messages are in. */
    async until(n: number): Promise<WatchResponse[]> {
      while (got.length < n) await new Promise<void>((r) => (waiting = r));
      return got;
    },
    async stop() {
      ac.abort();
      waiting?.();
      await pump;
    },
  };
}

const record = (action: string): StepRecordV2 => ({
  version: 2,
  method: "farm.v1.DeviceService/SendInput",
  action,
  description: action,
  arguments: {},
  result: { ok: true },
  before: null,
  after: null,
  startedAt: 1,
  durationMs: 2,
  attempts: [],
  requestedBy: "alice",
});

const lease = { leaseId: "l-1", physicalId: "pd-1", agentId: "a-1", serial: "S-1" };
const keyOf = (m: WatchResponse): string => {
  const k = m.kind;
  switch (k.case) {
    case "activity":
      return `activity:${k.value.id}`;
    case "evidence":
      return `evidence:${k.value.evidenceId}`;
    case "videoSession":
      return `video:${k.value.sessionId}:${k.value.status}`;
    case "session":
      return `session:${k.value.sessionId}`;
    case "sessionStep":
      return `step:${k.value.sessionId}/${k.value.sequence}`;
    default:
      return String(k.case);
  }
};

describe("watch streams across replicas", () => {
  it("sends a watcher on another replica each change as its own replica's watchers get it, a session's steps in order, without redoing side effects", async () => {
    const { a, b } = await pair();
    const onA = watcher(a.hub);
    const onB = watcher(b.hub);
    // Let both subscriptions register.
    await new Promise((r) => setImmediate(r));

    const act = await a.activity.record({ at: 1_700_000_000_000, caller: "alice", leaseId: "l-1", serial: "S-1", physicalId: "pd-1", agentId: "a-1", command: "RunShell", outcome: "ok", durationMs: 5, requestId: "r-1", detail: "echo hi" });
    const session = await a.sessions.start("alice", lease, { name: "smoke", context: { build: "1.2.3" }, ocr: false });
    for (const action of ["tap", "swipe", "key"]) await a.steps.append(session.sessionId, await a.steps.reserve(session.sessionId), record(action), { failed: false, ocr: null });
    await a.sessions.end(session.sessionId, "passed", { tokenName: "alice", admin: false });
    // A bundle as the store publishes it: indexed, then its hook told.
    const bundle: EvidenceRow = {
      evidenceId: randomUUID(),
      kind: "still",
      status: "complete",
      label: "login",
      serial: "S-1",
      physicalId: "pd-1",
      agentId: "a-1",
      createdAt: 1_700_000_000_500,
      totalBytes: 1234,
      manifestSha256: "ab".repeat(32),
    };
    await a.evidenceIndex.insert(bundle);
    a.evidence.onPublish?.(bundle);
    const video: VideoSessionRow = {
      sessionId: randomUUID(),
      agentId: "a-1",
      serial: "S-1",
      physicalId: "pd-1",
      requestedBy: "alice",
      createdAt: 1_700_000_000_600,
      updatedAt: 1_700_000_000_600,
      status: "recording",
      code: "",
      message: "",
      workerAvailable: true,
      recoveryState: "",
      manifestJson: "",
    };
    await a.videos.upsert(video);

    const local = await onA.until(8);
    const remote = await onB.until(8);
    expect(local.map(keyOf).sort()).toEqual([
      `activity:${act.id}`,
      `evidence:${bundle.evidenceId}`,
      `session:${session.sessionId}`,
      `session:${session.sessionId}`,
      `step:${session.sessionId}/1`,
      `step:${session.sessionId}/2`,
      `step:${session.sessionId}/3`,
      `video:${video.sessionId}:recording`,
    ].sort());
    // The same wire messages (a session re-read after it ended is sent ended: both notices re-read its latest row).
    const byKey = new Map(local.map((m) => [keyOf(m), m]));
    for (const m of remote) if (m.kind.case !== "session") expect(m, keyOf(m)).toEqual(byKey.get(keyOf(m)));
    const remoteSessions = remote.filter((m) => m.kind.case === "session");
    expect(remoteSessions).toHaveLength(2);
    expect(remoteSessions.at(-1)).toEqual(local.filter((m) => m.kind.case === "session").at(-1));
    expect(remoteSessions.at(-1)?.kind.value).toMatchObject({ sessionId: session.sessionId, name: "smoke", serial: "S-1", stepCount: 3 });
    // A session and its steps in the order stored.
    const ofSession = remote.filter((m) => m.kind.case === "session" || m.kind.case === "sessionStep").map((m) => (m.kind.case === "sessionStep" ? m.kind.value.sequence : "s"));
    expect(ofSession.filter((x) => x !== "s")).toEqual([1, 2, 3]);
    expect(ofSession[0]).toBe("s");
    // B told nobody and re-stored nothing: its own hooks never fired.
    expect(b.bus.sent).toEqual([]);
    expect(a.bus.sent.map(([k]) => k).sort()).toEqual(["activity", "evidence", "session", "session", "step", "step", "step", "video"]);
    expect(a.bus.sent).toContainEqual(["step", stepNoticeId(session.sessionId, 2)]);
    await onA.stop();
    await onB.stop();
  });

  it("tells the others whether or not anyone watches, and re-reads only while someone watches here", async () => {
    const { a, b } = await pair();
    const reads = vi.spyOn(b.activityStore, "get");
    const entry = { at: 1, caller: "alice", leaseId: "", serial: "S-1", physicalId: "", agentId: "a-1", command: "Tap", outcome: "ok", durationMs: 1, requestId: "", detail: "" };
    const unseen = await a.activity.record(entry);
    expect(a.bus.sent).toEqual([["activity", String(unseen.id)]]);
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(reads).not.toHaveBeenCalled();

    const onB = watcher(b.hub);
    await new Promise((r) => setImmediate(r));
    const seen = await a.activity.record(entry);
    const [got] = await onB.until(1);
    expect(got?.kind.case === "activity" && got.kind.value.id).toBe(BigInt(seen.id));
    expect(reads).toHaveBeenCalledTimes(1);
    await onB.stop();
  });

  it("names a step by its session and sequence, and refuses notice ids that name none", () => {
    const id = randomUUID();
    expect(parseStepNoticeId(stepNoticeId(id, 17))).toEqual({ sessionId: id, sequence: 17 });
    for (const bad of ["", "x", "/3", `${id}/`, `${id}/0`, `${id}/1.5`, `${id}/-2`, `${id}/abc`]) expect(parseStepNoticeId(bad), bad).toBeUndefined();
  });
});
