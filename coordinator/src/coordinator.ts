import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { createSecureContext } from "node:tls";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { COMPRESS_MIN_BYTES } from "@farm/shared/compression";
import { farmError, Errors } from "@farm/shared/errors";
import { createLogger, type Logger } from "@farm/shared/log";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import { FARM_VERSION } from "@farm/shared/version";
import type { ListenAddress } from "@farm/shared/listen-address";
import { Health } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { openFarmDatabase } from "./db/database.js";
import { TokenStore } from "./auth/token-store.js";
import { SummaryKey } from "./auth/summary-key.js";
import { registerPrivacyService } from "./auth/privacy-service.js";
import { Registry } from "./registry/registry.js";
import { authInterceptor } from "./auth/auth.js";
import { accessRules, servicesWithRules } from "./auth/access-rules.js";
import { OpenCalls } from "./auth/open-calls.js";
import { registerAgentService } from "./registry/agent-service.js";
import { registerRegistryService } from "./registry/registry-service.js";
import { registerTokenService } from "./auth/token-service.js";
import { registerHealthService } from "./http/health-service.js";
import { registerDeviceService } from "./routing/device-service.js";
import { registerLeaseService } from "./leases/lease-service.js";
import { registerActivityService } from "./activity/activity-service.js";
import { LeaseManager } from "./leases/lease-manager.js";
import { endWhatRevokedHeld } from "./leases/revoked-holder.js";
import { DeviceLabels } from "./devices/device-labels.js";
import { ActivityLog } from "./activity/activity-log.js";
import { Idempotency } from "./routing/idempotency.js";
import { ShellRelay } from "./routing/shell-relay.js";
import { BLOB_QUOTA_DEFAULT, BlobStore } from "./evidence/blob-store.js";
import { registerBlobService, registerAgentBlobService } from "./evidence/blob-service.js";
import { registerShellService, registerAgentShellService } from "./routing/shell-service.js";
import { registerEvidenceService } from "./evidence/evidence-service.js";
import { registerVideoService } from "./video/video-service.js";
import { VideoSessionIndex } from "./video/video-session-index.js";
import { WatchHub } from "./watch/watch-hub.js";
import { registerWatchService } from "./watch/watch-service.js";
import { wireWatchHub } from "./watch/watch-wiring.js";
import { shareWatchChanges } from "./watch/remote-watch.js";
import { watchTunnels } from "./watch/tunnel-watch.js";
import { Sessions } from "./sessions/sessions.js";
import { registerSessionService } from "./sessions/session-service.js";
import { SessionSteps } from "./sessions/session-steps.js";
import { SessionImageStore } from "./sessions/session-image-store.js";
import { StepRecorder } from "./sessions/step-recorder.js";
import { StepOcr } from "./sessions/step-ocr.js";
import { OcrPool } from "./sessions/ocr/ocr-pool.js";
import { CapturePlans } from "./sessions/capture-plans.js";
import { WebSessions } from "./auth/web-sessions.js";
import { dashboardHandler } from "./http/dashboard-http.js";
import { registerAgentEvidenceService } from "./evidence/agent-evidence-service.js";
import { EvidenceStore } from "./evidence/evidence-store.js";
import { EvidenceGrants } from "./evidence/evidence-grants.js";
import { DEFAULT_CAPTURES_PER_USER, DEFAULT_EVIDENCE_QUOTA_BYTES, EvidenceQuota } from "./evidence/evidence-quota.js";
import { createDualServer, createTlsServer, DEFAULT_CONNECTION_LIMITS, type ConnectionLimits, type TlsCredentials } from "./http/http-server.js";
import { DEFAULT_MAX_STREAMS_PER_PRINCIPAL, requestGate } from "./http/request-gate.js";
import { withMessageLimits } from "./http/message-limits.js";
import { grpcStreamFastPath } from "./http/grpc-stream-fast-path.js";
import { grpcUnaryFastPath } from "./http/grpc-unary-fast-path.js";
import { FastPathRoutes, recordingRouter } from "./http/fast-path-routes.js";
import { ANSWER_COMPRESSION } from "./http/answer-compression.js";
import { errorLogInterceptor } from "./http/error-log-interceptor.js";
import { peerKey, peerOf } from "./http/peer.js";
import { coordinatorMetrics } from "./http/metrics.js";
import { registerReplicaService } from "./replicas/replica-service.js";
import { startReplication, type Replication } from "./replicas/replication.js";
import { type ByteStoreKind } from "./bytes/byte-store.js";
import { AdbStreamRelay } from "./adb-tunnels/adb-stream-relay.js";
import { registerAdbTunnelService, registerAgentAdbService } from "./adb-tunnels/adb-tunnel-service.js";
import { endLeaseOnAgent, settleRawAdbOnLeaseEnd } from "./adb-tunnels/lease-end-settle.js";
import type { CleanupPolicyDoc } from "@farm/shared/cleanup/cleanup-policy";

import { DeviceCleanups } from "./cleanup/device-cleanups.js";
import { cleanPhonesBetweenUsers } from "./cleanup/lease-cleanup.js";
import { shareCleanups } from "./cleanup/cleanup-notices.js";
import type { LeaseRow } from "./leases/lease-store.js";
import { registerAgentScreenService, registerLiveScreenService, ScreenFeeds } from "./live-screen/live-screen-service.js";
import { LogcatFeeds } from "./live-logcat/logcat-feeds.js";
import { registerAgentLogcatService, registerLogcatService } from "./live-logcat/logcat-service.js";
import { DEFAULT_TUNNEL_LIMITS, Tunnels, type TunnelLimits } from "./adb-tunnels/tunnels.js";
import { webDriverEndpoint } from "./webdriver/webdriver-endpoint.js";
import { createByteStore, createStores, createSummaryKeyStore } from "./db/stores.js";

export interface CoordinatorOptions {
  listen: ListenAddress;
  dataDir: string;
  /** The site's cleanup between users (farm coordinator --cleanup FILE): run when each lease ends. */
  cleanupPolicy?: CleanupPolicyDoc;
  /** A postgres:// URL (replicas share it) or a SQLite file; default <data-dir>/coordinator.db. */
  database?: string;
  /** On PostgreSQL: where the other replicas reach this one (default: the URL it listens on). */
  replicaUrl?: string;
  /**
   * Where the bytes of evidence, session images and blobs live: files under
   * the data dir, or chunks in the database. Default: the database on
   * PostgreSQL (every replica serves every file), files on SQLite.
   */
  byteStore?: ByteStoreKind;
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
  /** Managed evidence bytes one user may keep in the store (default 10 GiB): bundles, session files and captures in flight. */
  evidenceQuotaBytes?: number;
  /** Captures and recordings one user may have in flight at once (default 4). */
  capturesPerUser?: number;
  /** Connection timeouts and the HTTP/2 stream cap (http-server.ts has the defaults). */
  connectionLimits?: Partial<ConnectionLimits>;
  /** Calls one token may have in flight at once (default 256). */
  maxStreamsPerPrincipal?: number;
  /** Blob bytes (uploads for install) one token may hold at once (default 2 GiB). */
  blobQuotaBytes?: number;
  /** Remote adb limits: tunnels per user, streams per tunnel, idle timeout (tunnels.ts has the defaults). */
  adbTunnels?: Partial<TunnelLimits>;
  /** OCR workers for sessions started with --ocr (default 1; 0 turns OCR off) and how many steps may wait for one (default 64). */
  ocr?: { workers?: number; maxQueue?: number };
  /** The site's default capture list: every session step of a session whose policy sets no `capture`. */
  defaultCapture?: string[];
  /** The site's redaction rules, merged (a union) with each session policy's `redact`. */
  siteRedact?: { labels?: string[]; fields?: string[]; headers?: string[]; unmaskHeaders?: string[] };
  /**
   * Serve unary gRPC calls (HTTP/2, binary, uncompressed requests) on the fast path rather than through
   * Connect's handler (default on; FARM_UNARY_FAST_PATH=0 turns it off, for measuring one against the other).
   */
  unaryFastPath?: boolean;
  /**
   * Serve streaming gRPC calls (HTTP/2, binary, uncompressed requests) on the stream fast path rather than
   * through Connect's handler (default on; FARM_STREAM_FAST_PATH=0 turns it off).
   */
  streamFastPath?: boolean;
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

export async function startCoordinator(opts: CoordinatorOptions): Promise<RunningCoordinator> {
  const log = opts.log ?? createLogger({ base: { component: "coordinator" } });
  await ensurePrivateDir(opts.dataDir);
  const database = await openFarmDatabase(opts.database, opts.dataDir);
  const stores = createStores(database);
  // Replicas: a revocation is answered once every replica's cache would refuse the token (token-store.ts).
  const tokens = new TokenStore(stores.tokens, undefined, database.dialect === "postgres");
  // What others see in place of a secret (command-privacy.ts): one key per farm.
  const summaries = await SummaryKey.open(createSummaryKeyStore(database, opts.dataDir));
  const registry = await Registry.open(stores.registry, { heartbeatMisses: opts.heartbeatMisses ?? 3, log });
  const closed = new AbortController();
  const labels = await DeviceLabels.open(stores.deviceLabels);
  const leases = await LeaseManager.open(stores.leases, registry, labels, log);
  // A device may have come free, or started to match a waiting request.
  registry.events.on("change", () => leases.kick(leases.dispatch()));
  labels.events.on("changed", () => leases.kick(leases.dispatch()));
  const activity = new ActivityLog(stores.activity);
  // A session is stored only under a lease still active in the database (a release through another replica may have just ended it).
  const sessions = new Sessions(stores.sessions, Date.now, { underLiveLease: true });
  // A session lives only as long as its lease: one that ended while we were down ends now.
  for (const s of await sessions.settle(new Set(leases.list().leases.map((l) => l.leaseId)))) log.info("session ended: its lease ended", { sessionId: s.sessionId, leaseId: s.leaseId });
  leases.events.on("leaseEnded", (lease, origin, running) => {
    // Replicas: the one that ended the lease ends its sessions in the shared database; the others would
    // each read it again for nothing (a read per lease end per replica).
    if (origin === "elsewhere") return;
    // The release statement saw no running session on it (PostgreSQL): nothing to end, unless a start
    // here is still storing one (it is ended after that start, as before).
    if (running === "none" && !sessions.startingUnder(lease.leaseId)) return;
    void sessions
      .endForLease(lease.leaseId)
      .then((ended) => {
        for (const s of ended) log.info("session ended: its lease ended", { sessionId: s.sessionId, leaseId: lease.leaseId, reason: lease.state });
      })
      .catch((err: unknown) => log.error("could not end the sessions of an ended lease; they end at the next start", { leaseId: lease.leaseId, error: (err as Error).message }));
  });
  // Phones held out of the pool between users (a cleanup running or failed), kept across restarts.
  const cleanups = await DeviceCleanups.open(stores.deviceCleanups, new Set(leases.list().leases.map((l) => l.leaseId)), (id, hold) => registry.setHold(id, hold));
  const cleaning = (lease: LeaseRow) => {
    const row = cleanups.rowOf(lease.physicalId);
    return row?.leaseId === lease.leaseId && row.state !== "leased";
  };
  // A tunnel's raw-adb action left unresolved by a killed agent is settled when its lease ends.
  settleRawAdbOnLeaseEnd({ registry, leases, log }, { cleanedElsewhere: cleaning });
  const phoneCleanup = opts.cleanupPolicy
    ? cleanPhonesBetweenUsers({ registry, leases, cleanups, activity, policy: opts.cleanupPolicy, log, endLeaseOnAgent: (lease) => endLeaseOnAgent({ registry, log }, lease) })
    : undefined;
  if (!phoneCleanup) {
    // Baselines of leases granted while a policy was in force: not held for a cleanup nobody runs now.
    leases.onEnding((lease) => void cleanups.forget(lease).catch((err: unknown) => log.warn("could not forget a lease's cleanup baseline", { leaseId: lease.leaseId, error: (err as Error).message })));
  }
  activity.onRecordFailure((err, command) => log.error("could not write the activity log; the call's outcome stands", { command, error: (err as Error).message }));
  // Request ids in the database: a retry through another replica, or after a restart, gets the first outcome.
  const idempotency = new Idempotency(stores.idempotency, {
    owner: randomUUID(),
    onStoreFailure: (err) => log.error("could not store a request id's outcome; repeats are told it is unknown", { error: (err as Error).message }),
  });
  const sweepRequestIds = () => void idempotency.sweep().catch((err: unknown) => log.warn("could not delete expired request ids; the next sweep tries again", { error: (err as Error).message }));
  sweepRequestIds();
  const shellRelay = new ShellRelay();
  const tunnels = new Tunnels({ ...DEFAULT_TUNNEL_LIMITS, ...opts.adbTunnels });
  const adbRelay = new AdbStreamRelay();
  const screenFeeds = new ScreenFeeds(log);
  const logcatFeeds = new LogcatFeeds(log);
  const shared = database.dialect === "postgres";
  const bytes = createByteStore(opts.byteStore ?? (shared ? "database" : "files"), opts.dataDir, database);
  const blobs = new BlobStore(opts.dataDir, { index: stores.blobIndex, bytes, quotaBytes: opts.blobQuotaBytes ?? BLOB_QUOTA_DEFAULT, shared });
  await blobs.init();
  const evidenceStore = new EvidenceStore(stores.evidenceIndex, opts.dataDir, { bytes, shared });
  const grants = new EvidenceGrants(stores.evidenceGrants);
  const quota = new EvidenceQuota(stores.quotaReservations, opts.evidenceQuotaBytes ?? DEFAULT_EVIDENCE_QUOTA_BYTES, opts.capturesPerUser ?? DEFAULT_CAPTURES_PER_USER);
  await evidenceStore.init();
  const videoIndex = new VideoSessionIndex(stores.videoSessions);
  const steps = new SessionSteps(stores.sessionSteps);
  const sessionImages = new SessionImageStore(opts.dataDir, bytes);
  await sessionImages.init();
  const plans = new CapturePlans(opts.defaultCapture, opts.siteRedact);
  sessions.events.on("session", (s) => {
    if (s.status !== "running") {
      steps.forget(s.sessionId);
      plans.forget(s.sessionId);
    }
  });
  const ocrWorkers = opts.ocr?.workers ?? 1;
  // Workers start on the first OCR'd step: a coordinator whose sessions never ask pays nothing.
  const ocrPool = ocrWorkers > 0 ? new OcrPool({ workers: ocrWorkers, maxQueue: opts.ocr?.maxQueue ?? 64 }) : undefined;
  const stepOcr = ocrPool ? new StepOcr(ocrPool, steps, sessionImages, log, sessions) : undefined;
  const recorder = new StepRecorder({ sessions, steps, images: sessionImages, blobs, ocr: stepOcr, log, plans, quota });
  const resumed = (await stepOcr?.resume()) ?? 0;
  if (resumed > 0) log.info("OCR resumed for steps a restart left pending", { steps: resumed });
  const hub = new WatchHub();
  const watchSources = { registry, leases, labels, activity, evidence: evidenceStore, videos: videoIndex, sessions, steps, log };
  const watchWiring = wireWatchHub(hub, watchSources);
  watchTunnels(hub, tunnels);
  const web = new WebSessions(tokens, stores.webSessions);
  const openCalls = new OpenCalls();
  const dashboardDir = opts.dashboardDir === undefined ? defaultDashboardDir() : opts.dashboardDir;
  if (!dashboardDir) log.warn("dashboard assets not found; the dashboard answers 503 until they are built (make build)");
  const insecure = opts.insecure === true;
  // Set once listening: the WebDriver endpoint calls farm's services at the coordinator's own address.
  let selfUrl = "";
  const webdriver = webDriverEndpoint({ tokens, url: () => selfUrl, caFile: opts.tls?.certFile, insecure, log });
  const dashboard = dashboardHandler({ web, tokens, blobs, evidence: evidenceStore, sessionImages: { steps, images: sessionImages }, assetsDir: dashboardDir, insecure, log });
  const unaryStats = { fast: 0, fastStreams: 0 };
  const metrics = await coordinatorMetrics({ registry, leases, activity, evidence: evidenceStore, videos: videoIndex, screens: screenFeeds, logcats: logcatFeeds, unary: unaryStats });
  const tlsCreds = opts.tls ? await readTlsCredentials(opts.tls) : undefined;
  if (!tlsCreds && insecure) log.warn("--insecure: tokens are accepted over cleartext from other machines; use only on a trusted network");

  // Set once listening (on PostgreSQL): other replicas' credentials are checked against its membership.
  let replication: Replication | undefined;
  const replicas = { verify: async (bearer: string) => replication?.membership.verify(bearer) };

  const interceptors = [errorLogInterceptor(log, [opts.dataDir, tmpdir()]), authInterceptor(tokens, accessRules, { web, insecure, calls: openCalls, replicas })];
  const contextValues = (req: IncomingMessage | Http2ServerRequest) => createContextValues().set(peerKey, peerOf(req));
  const unaryRoutes = new FastPathRoutes("unary");
  const streamRoutes = new FastPathRoutes("stream");
  const handler = connectNodeAdapter({
    compressMinBytes: COMPRESS_MIN_BYTES,
    // The same list the fast paths fall back to (fast-path-routes.ts): gzip at level 1 for answers.
    acceptCompression: ANSWER_COMPRESSION,
    interceptors,
    contextValues,
    routes(connectRouter) {
      // Every service with its message size cap (message-limits.ts); its unary methods also on the fast path.
      const router = withMessageLimits(recordingRouter(connectRouter, [unaryRoutes, streamRoutes]), log);
      registerHealthService(router, {
        services: servicesWithRules().filter((s) => s !== Health.typeName),
        serving: () => !closed.signal.aborted,
        closed: closed.signal,
      });
      registerAgentService(router, { registry, tokens, log, helloTimeoutMs: 10_000 });
      registerRegistryService(router, { registry, cleanups, log });
      registerTokenService(router, {
        tokens,
        // Revocation ends what the token opened, not only what it opens next.
        onRevoked: async (name, by) => {
          let calls = 0;
          try {
            // What it holds (leases, with their tunnels, live screens and sessions; waits) on every replica, and its
            // open calls (a failure fails the answer: revoking again ends what is left).
            const held = await endWhatRevokedHeld({ leases, sessions, activity, log }, name, by, () => (calls = openCalls.revoke(name)));
            // A session of a revoked token is refused anyway (each use re-checks the token): a failure here only leaves rows behind.
            const dashboardSessions = await web.endSessionsOf(name).catch((err: unknown) => {
              log.error("could not end the revoked token's dashboard sessions", { principal: name, error: (err as Error).message });
              return 0;
            });
            log.info("token revoked", { principal: name, by, endedCalls: calls, endedLeases: held.leases, droppedWaits: held.waiters, endedDashboardSessions: dashboardSessions });
          } finally {
            // And what it opened on the other replicas (their agents' streams, Watch calls).
            await replication?.bus.publish("token", name).catch((err: unknown) => {
              log.error("could not tell the other replicas of a revoked token; their calls with it end at their next check", { principal: name, error: (err as Error).message });
            });
          }
        },
      });
      registerDeviceService(router, { registry, leases, activity, idempotency, log, recorder, summaries });
      registerLeaseService(router, { leases, registry });
      registerActivityService(router, { activity, summaries });
      registerShellService(router, { registry, leases, activity, relay: shellRelay, log });
      registerAgentShellService(router, { relay: shellRelay });
      registerBlobService(router, { blobs });
      registerAgentBlobService(router, { blobs });
      registerEvidenceService(router, { registry, leases, store: evidenceStore, grants, quota, activity, log, recorder });
      registerVideoService(router, { registry, store: evidenceStore, index: videoIndex, activity, log, leases, grants, quota });
      registerWatchService(router, { hub, summaries });
      registerSessionService(router, { sessions, steps, images: sessionImages, recorder, leases, registry, activity, log, summaries });
      registerPrivacyService(router, {
        key: summaries,
        log,
        // The other replicas re-read the key from the shared database.
        onRotated: async () => {
          await replication?.bus.publish("summaryKey", "1").catch((err: unknown) => {
            log.error("could not tell the other replicas of the new summary key; they read it at their next resync or start", { error: (err as Error).message });
          });
        },
      });
      registerAgentEvidenceService(router, { store: evidenceStore, grants, quota, log });
      const tunnelDeps = { registry, leases, activity, tunnels, relay: adbRelay, log };
      const screenDeps = { registry, leases, feeds: screenFeeds };
      registerReplicaService(router, { registry, relay: shellRelay, screens: screenDeps, logcats: { registry, leases, feeds: logcatFeeds }, tunnels: tunnelDeps });
      registerAdbTunnelService(router, tunnelDeps);
      registerAgentAdbService(router, { relay: adbRelay });
      registerLiveScreenService(router, screenDeps);
      registerAgentScreenService(router, { feeds: screenFeeds });
      registerLogcatService(router, { registry, leases, feeds: logcatFeeds });
      registerAgentLogcatService(router, { feeds: logcatFeeds });
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
      void (async () => {
        // W3C WebDriver at /wd/hub and / (/session…, /status); everything else is the dashboard's.
        if (await webdriver.handle(req, res as ServerResponse)) return;
        if (await dashboard(req, res as ServerResponse)) return;
        res.writeHead(404, { "content-type": "text/plain" });
        res.end("not found\n");
      })();
    },
  });
  // Unary gRPC calls without Connect's per-call cost, the same interceptors and implementations (grpc-unary-fast-path.ts).
  const fastUnary = opts.unaryFastPath ?? process.env["FARM_UNARY_FAST_PATH"] !== "0";
  // Streaming gRPC calls the same way (grpc-stream-fast-path.ts): the agents' control streams, remote adb, live feeds.
  const fastStreams = opts.streamFastPath ?? process.env["FARM_STREAM_FAST_PATH"] !== "0";
  const streamed = fastStreams ? grpcStreamFastPath(handler, { routes: streamRoutes, interceptors, contextValues, log, stats: unaryStats }) : handler;
  const served = fastUnary ? grpcUnaryFastPath(streamed, { routes: unaryRoutes, interceptors, contextValues, log, stats: unaryStats }) : streamed;
  // Credentials and announced sizes are checked from the headers, before any body is read.
  const gated = requestGate(served, {
    replicas,
    tokens,
    web,
    insecure,
    isOpen: (method) => accessRules[method]?.kind === "none",
    // WebDriver paths are capped by the endpoint itself, from Content-Length before reading, so the refusal is a W3C error.
    plainBodyCapOf: (path) => (webdriver.bodyCapOf(path) === undefined ? undefined : Number.POSITIVE_INFINITY),
    maxStreamsPerPrincipal: opts.maxStreamsPerPrincipal ?? DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
    log,
  });
  const limits: ConnectionLimits = { ...DEFAULT_CONNECTION_LIMITS, ...opts.connectionLimits };
  const dual = tlsCreds ? createTlsServer(gated, tlsCreds, limits) : createDualServer(gated, limits);
  await new Promise<void>((resolve, reject) => {
    dual.server.once("error", reject);
    dual.server.listen(opts.listen.port, opts.listen.host, () => resolve());
  });
  const addr = dual.server.address() as AddressInfo;
  const host = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  const url = `${tlsCreds ? "https" : "http"}://${host}:${addr.port}`;
  selfUrl = url;

  const sweep = setInterval(() => {
    void registry.sweep().then(
      (ids) => {
        for (const id of ids) log.warn("agent missed heartbeats; marked offline", { agentId: id });
      },
      (err: unknown) => log.error("agents that missed heartbeats are offline, but their last heartbeat times were not stored", { error: (err as Error).message }),
    );
    leases.kick(leases.sweep());
  }, opts.sweepIntervalMs ?? 250);
  const flush = setInterval(() => {
    void registry.flushHeartbeats().catch((err: unknown) => log.warn("could not store agents' heartbeat times; the next flush tries again", { error: (err as Error).message }));
    void blobs.sweep();
    sweepRequestIds();
  }, 10_000);
  sweep.unref();
  flush.unref();
  if (database.dialect === "postgres") {
    replication = await startReplication({ database, databaseUrl: opts.database ?? "", url: opts.replicaUrl ?? url, registry, leases, labels, log });
    // Activity, evidence, video sessions, sessions and steps made on any replica, for Watch streams here and there.
    shareWatchChanges(hub, watchSources, watchWiring, replication.bus);
    // Phones cleaning or needing attention, held out of leases on every replica.
    shareCleanups(cleanups, replication.bus, log);
    // Notices may have been missed while the listening connection was down: watchers here reconnect and re-read.
    replication.bus.events.on("resync", () => hub.cutAll(farmError(Errors.COORDINATOR_UNAVAILABLE, "this coordinator replica may have missed changes made on the others; reconnect and re-read the lists")));
    // The summary key rotated through another replica, or notices missed: read it again.
    const reloadKey = () => void summaries.reload().catch((err: unknown) => log.error("could not re-read the summary key", { error: (err as Error).message }));
    replication.bus.events.on("resync", reloadKey);
    // A revocation's notice may be among those missed: authenticate every token against the database again.
    replication.bus.events.on("resync", () => tokens.forgetAll());
    replication.bus.events.on("change", (c) => {
      if (c.kind === "summaryKey") reloadKey();
    });
    // A token revoked through another replica: end what it opened here.
    replication.bus.events.on("change", (c) => {
      if (c.kind !== "token") return;
      tokens.forget(c.id);
      const calls = openCalls.revoke(c.id);
      if (calls > 0) log.info("token revoked on another replica; its calls here ended", { principal: c.id, endedCalls: calls });
      // That replica ended what it held; a grant made here before this notice came ends now.
      leases.kick(endWhatRevokedHeld({ leases, sessions, activity, log }, c.id, undefined));
    });
    log.info("replica joined", { replicaId: replication.id, replicas: replication.membership.live().length, database: database.where });
  }
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
      // WebDriver sessions end first, while their farm calls can still be served: recorded sessions end, leases go back.
      await webdriver.closeAll();
      closed.abort();
      // First: the other replicas stop routing through this one before its agents are let go.
      await replication?.close().catch((err: Error) => log.error("could not leave the replicas cleanly; they expire this one", { error: err.message }));
      clearInterval(sweep);
      clearInterval(flush);
      await registry.terminateAll(farmError(Errors.COORDINATOR_SHUTTING_DOWN, "coordinator is shutting down")).catch((err: unknown) => {
        log.error("could not store agents' last heartbeat times at shutdown", { error: (err as Error).message });
      });
      // Waiting callers are told, but keep their place: the stored queue is
      // resumed by the next start (the CLI asks again with the same ticket).
      leases.abandonCalls(farmError(Errors.COORDINATOR_SHUTTING_DOWN, "coordinator is shutting down; ask again with the same ticket"));
      // A cleanup cut here comes back needs-attention at the next start; one about to finish gets to.
      await Promise.race([phoneCleanup?.idle(), new Promise((r) => setTimeout(r, 2_000).unref())]);
      screenFeeds.endAll();
      logcatFeeds.endAll();
      await dual.close();
      await ocrPool?.close();
      await database.close();
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
