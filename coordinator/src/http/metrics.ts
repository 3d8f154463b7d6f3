import { Counter, Gauge, Registry as MetricsRegistry } from "prom-client";
import type { ActivityLog } from "../activity/activity-log.js";
import type { EvidenceStore } from "../evidence/evidence-store.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { Registry } from "../registry/registry.js";
import type { VideoSessionIndex } from "../video/video-session-index.js";

export interface CoordinatorMetrics {
  contentType: string;
  render(): Promise<string>;
}

/**
 * Prometheus series for the coordinator. Gauges are read from the live
 * state at scrape time; routed actions count from the activity log (loaded
 * once, then incremented), so the counter survives restarts.
 */
export async function coordinatorMetrics(src: {
  registry: Registry;
  leases: LeaseManager;
  activity: ActivityLog;
  evidence: EvidenceStore;
  videos: VideoSessionIndex;
  screens?: { stats(): { phones: number; viewers: number; queuedBytes: number; resyncs: number } };
  logcats?: { stats(): { phones: number; viewers: number; queuedLines: number; dropped: number } };
  /** Calls served on the fast paths: unary (grpc-unary-fast-path.ts) and streaming (grpc-stream-fast-path.ts). */
  unary?: { fast: number; fastStreams?: number };
}): Promise<CoordinatorMetrics> {
  const registry = new MetricsRegistry();
  const unary = src.unary;
  if (unary) {
    new Counter({
      name: "farm_unary_fast_path_calls_total",
      help: "Unary gRPC calls the coordinator served on its fast path; other calls go through Connect's handler",
      registers: [registry],
      collect() {
        this.reset();
        this.inc(unary.fast);
      },
    });
    new Counter({
      name: "farm_stream_fast_path_calls_total",
      help: "Streaming gRPC calls the coordinator served on its fast path; other calls go through Connect's handler",
      registers: [registry],
      collect() {
        this.reset();
        this.inc(unary.fastStreams ?? 0);
      },
    });
  }
  const screens = src.screens;
  if (screens) {
    new Gauge({
      name: "farm_live_screens",
      help: "Phones whose live screen is being streamed",
      registers: [registry],
      collect() {
        this.set(screens.stats().phones);
      },
    });
    new Gauge({
      name: "farm_live_screen_viewers",
      help: "Live screen viewers connected",
      registers: [registry],
      collect() {
        this.set(screens.stats().viewers);
      },
    });
    new Gauge({
      name: "farm_live_screen_queued_bytes",
      help: "Frame bytes waiting for live screen viewers (each viewer's are bounded; one that falls behind restarts at a key frame)",
      registers: [registry],
      collect() {
        this.set(screens.stats().queuedBytes);
      },
    });
    new Counter({
      name: "farm_live_screen_resyncs_total",
      help: "Times a live screen viewer fell behind and was restarted at the last key frame",
      registers: [registry],
      collect() {
        this.reset();
        this.inc(screens.stats().resyncs);
      },
    });
  }
  const logcats = src.logcats;
  if (logcats) {
    new Gauge({
      name: "farm_live_logcats",
      help: "Phones whose live logcat is being followed (one stream per phone, shared by its viewers)",
      registers: [registry],
      collect() {
        this.set(logcats.stats().phones);
      },
    });
    new Gauge({
      name: "farm_live_logcat_viewers",
      help: "Live logcat viewers connected",
      registers: [registry],
      collect() {
        this.set(logcats.stats().viewers);
      },
    });
    new Counter({
      name: "farm_live_logcat_dropped_lines_total",
      help: "Log lines live logcat viewers missed because they fell behind (each viewer's queue is bounded)",
      registers: [registry],
      collect() {
        this.reset();
        this.inc(logcats.stats().dropped);
      },
    });
  }
  new Gauge({
    name: "farm_agents",
    help: "Agents by state (online, offline, draining)",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of ["online", "offline", "draining"]) this.set({ state: s }, 0);
      for (const a of src.registry.listAgents()) this.inc({ state: a.draining && a.online ? "draining" : a.online ? "online" : "offline" });
    },
  });
  new Gauge({
    name: "farm_devices",
    help: "adb serials by state (device, offline, unauthorized, agent-offline, ...)",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      this.reset();
      for (const d of src.registry.listDevices()) this.inc({ state: d.state });
    },
  });
  new Gauge({
    name: "farm_leases_active",
    help: "Active leases",
    registers: [registry],
    collect() {
      this.set(src.leases.list().leases.length);
    },
  });
  new Gauge({
    name: "farm_lease_queue_length",
    help: "Lease requests waiting for a device",
    registers: [registry],
    collect() {
      this.set(src.leases.list().queue.length);
    },
  });
  const routed = new Counter({ name: "farm_routed_actions_total", help: "Routed actions by command and outcome (ok or the error code)", labelNames: ["command", "outcome"], registers: [registry] });
  // Read before the coordinator serves (nothing is recorded meanwhile), then counted as entries are recorded.
  for (const r of await src.activity.countByOutcome()) routed.inc({ command: r.command, outcome: r.outcome }, r.n);
  src.activity.onRecord((row) => routed.inc({ command: row.command, outcome: row.outcome }));
  // Counted in memory: these are the entries the log could not keep.
  const lost = new Counter({ name: "farm_history_write_failures_total", help: "Activity log entries that could not be written (the call's outcome stood), by command", labelNames: ["command"], registers: [registry] });
  src.activity.onRecordFailure((_err, command) => lost.inc({ command }));
  // Bundles are never deleted, so these sums only grow: counters.
  new Counter({
    name: "farm_evidence_bytes_total",
    help: "Bytes of evidence bundles stored",
    registers: [registry],
    async collect() {
      const totals = await src.evidence.totals();
      this.reset();
      this.inc(totals.reduce((sum, t) => sum + t.bytes, 0));
    },
  });
  new Counter({
    name: "farm_evidence_bundles_total",
    help: "Evidence bundles stored, by kind and status",
    labelNames: ["kind", "status"],
    registers: [registry],
    async collect() {
      const totals = await src.evidence.totals();
      this.reset();
      for (const t of totals) this.inc({ kind: t.kind, status: t.status }, t.bundles);
    },
  });
  new Gauge({
    name: "farm_video_sessions",
    help: "Video sessions by last known status",
    labelNames: ["status"],
    registers: [registry],
    async collect() {
      const counts = await src.videos.countByStatus();
      this.reset();
      for (const r of counts) this.set({ status: r.status }, r.n);
    },
  });
  return { contentType: registry.contentType, render: () => registry.metrics() };
}
