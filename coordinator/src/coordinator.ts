import { readFile } from "node:fs/promises";
import { createSecureContext } from "node:tls";
import type { ServerResponse } from "node:http";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { Code, createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { farmError } from "@farm/shared/errors";
import { createLogger, type Logger } from "@farm/shared/log";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import { FARM_VERSION } from "@farm/shared/version";
import type { ListenAddress } from "@farm/shared/listen-address";
import { AgentService } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { TokenService } from "@farm/shared/gen/farm/v1/token_service_pb";
import { Health } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { openDatabase } from "./db/open-database.js";
import { TokenStore } from "./token-store.js";
import { Registry } from "./registry.js";
import { authInterceptor, type AccessRule } from "./auth.js";
import { registerAgentService } from "./agent-service.js";
import { registerRegistryService } from "./registry-service.js";
import { registerTokenService } from "./token-service.js";
import { registerHealthService } from "./health-service.js";
import { registerDeviceService } from "./device-service.js";
import { registerLeaseService } from "./lease-service.js";
import { registerActivityService } from "./activity-service.js";
import { LeaseManager } from "./lease-manager.js";
import { ActivityLog } from "./activity-log.js";
import { IdempotencyCache } from "./idempotency-cache.js";
import { ShellRelay } from "./shell-relay.js";
import { BlobStore } from "./blob-store.js";
import { registerBlobService, registerAgentBlobService } from "./blob-service.js";
import { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { AgentBlobService } from "@farm/shared/gen/farm/v1/agent_blob_service_pb";
import { registerShellService, registerAgentShellService } from "./shell-service.js";
import { ShellService } from "@farm/shared/gen/farm/v1/shell_service_pb";
import { AgentShellService } from "@farm/shared/gen/farm/v1/agent_shell_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { ActivityService } from "@farm/shared/gen/farm/v1/activity_service_pb";
import { registerEvidenceService } from "./evidence-service.js";
import { registerVideoService } from "./video-service.js";
import { VideoSessionIndex } from "./video-session-index.js";
import { VideoService } from "@farm/shared/gen/farm/v1/video_service_pb";
import { WatchService } from "@farm/shared/gen/farm/v1/watch_service_pb";
import { WatchHub } from "./watch-hub.js";
import { registerWatchService } from "./watch-service.js";
import { wireWatchHub } from "./watch-wiring.js";
import { WebSessions } from "./web-sessions.js";
import { dashboardHandler } from "./dashboard-http.js";
import { registerAgentEvidenceService } from "./agent-evidence-service.js";
import { EvidenceStore } from "./evidence-store.js";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { AgentEvidenceService } from "@farm/shared/gen/farm/v1/agent_evidence_service_pb";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { createDualServer, createTlsServer, type TlsCredentials } from "./http-server.js";
import { peerKey, peerOf } from "./peer.js";
import { coordinatorMetrics } from "./metrics.js";

export interface CoordinatorOptions {
  listen: ListenAddress;
  dataDir: string;
  /** Missed heartbeat intervals before an agent is offline. */
  heartbeatMisses?: number;
  /** How often the heartbeat sweep runs. */
  sweepIntervalMs?: number;
  log?: Logger;
  /** Built dashboard assets; default: the repository's dashboard/dist when present. */
  dashboardDir?: string | null;
  /** Serve TLS with this certificate chain and key (PEM files, re-read on reloadTls). */
  tls?: { certFile: string; keyFile: string };
  /** Accept tokens over cleartext from other machines (trusted networks only). */
  insecure?: boolean;
}

export interface RunningCoordinator {
  leases: LeaseManager;
  /** Base URL clients use, e.g. http://127.0.0.1:7420 */
  url: string;
  port: number;
  tokens: TokenStore;
  registry: Registry;
  /** Re-reads the certificate and key; attached agents keep their connections. */
  reloadTls(): Promise<void>;
  close(): Promise<void>;
}

const rules: Record<string, AccessRule> = {
  [Health.typeName]: { kind: "none" },
  [AgentService.typeName]: { kind: "agent" },
  [RegistryService.typeName]: { kind: "user" },
  [TokenService.typeName]: { kind: "user", admin: true },
  [DeviceService.typeName]: { kind: "user" },
  [LeaseService.typeName]: { kind: "user" },
  [ActivityService.typeName]: { kind: "user" },
  [ShellService.typeName]: { kind: "user" },
  [AgentShellService.typeName]: { kind: "agent" },
  [BlobService.typeName]: { kind: "user" },
  [AgentBlobService.typeName]: { kind: "agent" },
  [EvidenceService.typeName]: { kind: "user" },
  [VideoService.typeName]: { kind: "user" },
  [WatchService.typeName]: { kind: "user" },
  [AgentEvidenceService.typeName]: { kind: "agent" },
};

export async function startCoordinator(opts: CoordinatorOptions): Promise<RunningCoordinator> {
  const log = opts.log ?? createLogger({ base: { component: "coordinator" } });
  await ensurePrivateDir(opts.dataDir);
  const database = openDatabase(join(opts.dataDir, "coordinator.db"));
  const tokens = new TokenStore(database.db);
  const registry = new Registry(database.db, { heartbeatMisses: opts.heartbeatMisses ?? 3 });
  const closed = new AbortController();
  const leases = new LeaseManager(database.db, registry, log);
  const activity = new ActivityLog(database.db);
  activity.onRecordFailure = (err, command) => log.error("could not write the activity log; the call's outcome stands", { command, error: (err as Error).message });
  const idempotency = new IdempotencyCache();
  const shellRelay = new ShellRelay();
  const blobs = new BlobStore(opts.dataDir);
  await blobs.init();
  const evidenceStore = new EvidenceStore(database.db, opts.dataDir);
  await evidenceStore.init();
  const videoIndex = new VideoSessionIndex(database.db);
  const hub = new WatchHub();
  wireWatchHub(hub, { registry, leases, activity, evidence: evidenceStore, videos: videoIndex });
  const web = new WebSessions(tokens);
  const dashboardDir = opts.dashboardDir === undefined ? defaultDashboardDir() : opts.dashboardDir;
  if (!dashboardDir) log.warn("dashboard assets not found; the dashboard answers 503 until they are built (make build)");
  const insecure = opts.insecure === true;
  const dashboard = dashboardHandler({ web, tokens, evidence: evidenceStore, assetsDir: dashboardDir, insecure, log });
  const metrics = coordinatorMetrics({ registry, leases, activity, evidence: evidenceStore, videos: videoIndex });
  const tlsCreds = opts.tls ? await readTlsCredentials(opts.tls) : undefined;
  if (!tlsCreds && insecure) log.warn("--insecure: tokens are accepted over cleartext from other machines; use only on a trusted network");

  const handler = connectNodeAdapter({
    interceptors: [authInterceptor(tokens, rules, { web, insecure })],
    contextValues: (req) => createContextValues().set(peerKey, peerOf(req)),
    routes(router) {
      registerHealthService(router, {
        services: Object.keys(rules).filter((s) => s !== Health.typeName),
        serving: () => !closed.signal.aborted,
        closed: closed.signal,
      });
      registerAgentService(router, { registry, log, helloTimeoutMs: 10_000 });
      registerRegistryService(router, { registry, log });
      registerTokenService(router, { tokens });
      registerDeviceService(router, { registry, leases, activity, idempotency, log });
      registerLeaseService(router, { leases, registry });
      registerActivityService(router, { activity });
      registerShellService(router, { registry, leases, activity, relay: shellRelay, log });
      registerAgentShellService(router, { relay: shellRelay });
      registerBlobService(router, { blobs });
      registerAgentBlobService(router, { blobs });
      registerEvidenceService(router, { registry, store: evidenceStore, activity, log });
      registerVideoService(router, { registry, store: evidenceStore, index: videoIndex, activity, log });
      registerWatchService(router, { hub });
      registerAgentEvidenceService(router, { store: evidenceStore, log });
    },
    fallback(req, res) {
      if (req.method === "GET" && (req.url === "/healthz" || req.url?.startsWith("/healthz?"))) {
        const ok = !closed.signal.aborted;
        res.writeHead(ok ? 200 : 503, { "content-type": "application/json" });
        res.end(JSON.stringify({ status: ok ? "ok" : "shutting-down", version: FARM_VERSION }));
        return;
      }
      // Counts only, no names or tokens: unauthenticated like /healthz, for Prometheus.
      if (req.method === "GET" && (req.url === "/metrics" || req.url?.startsWith("/metrics?"))) {
        void metrics.render().then((text) => {
          res.writeHead(200, { "content-type": metrics.contentType });
          res.end(text);
        });
        return;
      }
      void dashboard(req, res as ServerResponse).then((handled) => {
        if (handled) return;
        res.writeHead(404, { "content-type": "text/plain" });
        res.end("not found\n");
      });
    },
  });
  const dual = tlsCreds ? createTlsServer(handler, tlsCreds) : createDualServer(handler);
  await new Promise<void>((resolve, reject) => {
    dual.server.once("error", reject);
    dual.server.listen(opts.listen.port, opts.listen.host, () => resolve());
  });
  const addr = dual.server.address() as AddressInfo;
  const host = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  const url = `${tlsCreds ? "https" : "http"}://${host}:${addr.port}`;

  const sweep = setInterval(() => {
    for (const id of registry.sweep()) log.warn("agent missed heartbeats; marked offline", { agentId: id });
    leases.sweep();
  }, opts.sweepIntervalMs ?? 250);
  const flush = setInterval(() => {
    registry.flushHeartbeats();
    void blobs.sweep();
  }, 10_000);
  sweep.unref();
  flush.unref();
  log.info("coordinator listening", { url, dataDir: opts.dataDir, version: FARM_VERSION });

  return {
    url,
    port: addr.port,
    tokens,
    registry,
    leases,
    async reloadTls() {
      if (!opts.tls || !dual.reload) throw new Error("this coordinator does not serve TLS");
      const next = await readTlsCredentials(opts.tls);
      dual.reload(next);
      log.info("TLS certificate reloaded", { certFile: opts.tls.certFile });
    },
    async close() {
      if (closed.signal.aborted) return;
      closed.abort();
      clearInterval(sweep);
      clearInterval(flush);
      registry.terminateAll(farmError(Code.Unavailable, "COORDINATOR_SHUTTING_DOWN", "coordinator is shutting down"));
      await dual.close();
      database.close();
      log.info("coordinator stopped");
    },
  };
}

/** The repository's built dashboard (dashboard/dist next to coordinator/), if present. */
function defaultDashboardDir(): string | null {
  const dir = fileURLToPath(new URL("../../dashboard/dist", import.meta.url));
  return existsSync(join(dir, "index.html")) ? dir : null;
}

/** Reads and checks a certificate and key before they replace anything. */
async function readTlsCredentials(files: { certFile: string; keyFile: string }): Promise<TlsCredentials> {
  const [cert, key] = await Promise.all([readFile(files.certFile), readFile(files.keyFile)]);
  // Fails here, with the file named, rather than at the first handshake.
  createSecureContext({ cert, key });
  return { cert, key };
}
