import { homedir, hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { DeviceEventSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { openAgentDb } from "./db/open-agent-db.js";
import { OwnershipJournal } from "./ownership/ownership-journal.js";
import { openHostJournalDb } from "./db/host-journal-db.js";
import { importLegacyJournal } from "./ownership/legacy-journal.js";
import { UnresolvedReports } from "./devices/unresolved-reports.js";
import { DeviceJobs } from "./actions/device-job.js";
import { PinStore } from "./devices/pin-store.js";
import { DeviceHistory } from "./devices/device-history.js";
import { DeviceOwnership } from "./ownership/device-ownership.js";
import { lockDataDir } from "./ownership/data-dir-lock.js";
import { OsLock } from "./ownership/os-lock.js";
import { coordinatorTransport } from "./uplink/coordinator-transport.js";
import { FARM_VERSION } from "@farm/shared/version";
import { stepShooter } from "./session/step-shooter.js";
import { beginCaptures } from "./session/step-captures.js";
import { createRedactor } from "@farm/shared/redaction/redactor";
import { callDispatcher } from "./rpc/call-dispatch.js";
import { agentRoutes } from "./rpc/routes.js";
import type { AgentServiceDeps } from "./rpc/service-deps.js";
import { shellAction } from "./actions/shell-action.js";
import { setPropAction } from "./actions/setprop-action.js";
import { cleanupAction, readBaseline } from "./cleanup/phone-cleanup.js";
import { inputAction } from "./actions/input-action.js";
import { rebootAction } from "./actions/reboot-action.js";
import { interactiveShellAction } from "./actions/interactive-shell-action.js";
import { pushFileAction } from "./actions/push-file-action.js";
import { installAction } from "./actions/install-action.js";
import { resumeStagedUploads } from "./evidence/staged-uploads.js";
import { VideoSessions } from "./video/video-sessions.js";
import { agentMetrics } from "./agent-metrics.js";
import { IosDevices } from "./ios/ios-devices.js";
import { parseDevicectl, resetDevicectlDir } from "./ios/devicectl.js";
import type { ListenAddress } from "@farm/shared/listen-address";
import { createLogger, type Logger } from "@farm/shared/log";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import { createAdbClient, type AdbServerAddress } from "./adb/adb-client.js";
import { loadAgentIdentity } from "./uplink/agent-identity.js";
import { DeviceWatcher } from "./devices/device-watcher.js";
import { adbServerListening } from "./adb/adb-probe.js";
import { Uplink } from "./uplink/uplink.js";
import { LiveScreens, serveScreenOver } from "./live-screen/live-screens.js";
import { LiveLogcats, serveLogcatOver } from "./live-logcat/live-logcats.js";
import { AdbTunnels } from "./adb-tunnel/adb-tunnels.js";
import { serveAdbStreamOver } from "./adb-tunnel/adb-stream.js";
import { ADB_STREAM_WINDOW_BYTES } from "@farm/shared/http2-windows";
import { rawAdbAction } from "./adb-tunnel/raw-adb-action.js";

export interface AgentOptions {
  /** Where per-device lock files live; shared by every farm process on the host. */
  lockDir?: string;
  coordinatorUrl: string;
  token: string;
  dataDir: string;
  adb: AdbServerAddress;
  /** Where adb's port came from (flag, env, config file or default), for the start log line. */
  adbPortSource?: string;
  name?: string;
  heartbeatIntervalMs?: number;
  /** Start the adb server when it is not running (adb's own behaviour). Default true. */
  startAdbServer?: boolean;
  log?: Logger;
  onAttachedChange?: (attached: boolean) => void;
  /** PEM bundle to verify the coordinator with instead of the system roots. */
  caFile?: string;
  /** Allow the token over cleartext to a non-loopback coordinator. */
  insecure?: boolean;
  /** Serve Prometheus metrics here (GET /metrics). */
  metricsListen?: ListenAddress;
  /** Apple's devicectl (e.g. "xcrun devicectl"): report iOS devices and their app endpoints. */
  devicectl?: string;
  /** Bytes one remote adb tunnel's streams may hold here (DEFAULT_TUNNEL_BUDGET_BYTES). */
  adbTunnelBudgetBytes?: number;
  /** Bytes all remote adb streams may hold here (DEFAULT_AGENT_BUDGET_BYTES). */
  adbAgentBudgetBytes?: number;
}

export interface RunningAgent {
  id: string;
  name: string;
  lockDir: string;
  readonly attached: boolean;
  /** Where the metrics are served, when they are. */
  metricsUrl: string | undefined;
  /** Resolves with the reason when the coordinator asks this agent to drain. */
  drainRequested: Promise<string>;
  /**
   * Stops taking work, tells the coordinator (no new leases on its devices),
   * and waits up to timeoutMs for running commands. Recording workers are
   * left alone: they are detached and finish on their own.
   */
  drain(reason: string, timeoutMs: number): Promise<{ unfinished: number }>;
  close(): Promise<void>;
}

export async function startAgent(opts: AgentOptions): Promise<RunningAgent> {
  await ensurePrivateDir(opts.dataDir);
  const dataDirLock = lockDataDir(opts.dataDir);
  const identity = await loadAgentIdentity(opts.dataDir);
  const name = opts.name ?? hostname();
  const log = (opts.log ?? createLogger({ base: { component: "agent" } })).child({ agentId: identity.id });
  const lockDir = opts.lockDir ?? defaultLockDir();
  await ensurePrivateDir(lockDir);
  const database = openAgentDb(join(opts.dataDir, "agent.db"));
  const hostJournal = openHostJournalDb(lockDir);
  const journal = new OwnershipJournal(hostJournal.db, hostJournal.sqlite);
  const imported = importLegacyJournal(database, journal, identity.id);
  if (imported > 0) log.info("moved this agent's journal entries into the host journal", { count: imported, journal: hostJournal.file });
  const pins = new PinStore(database.db);
  let uplink: Uplink | undefined;
  const history = new DeviceHistory(database.db, (e) => {
    log.info("device event", { ...e });
    uplink?.sendEvent(create(DeviceEventSchema, { serial: e.serial, physicalId: e.physicalId, kind: e.kind, detail: e.detail, timeUnixMs: BigInt(e.at) }));
  });
  const adbClient = createAdbClient(opts.adb);
  const watcher: DeviceWatcher = new DeviceWatcher({
    adb: adbClient,
    server: opts.adb,
    log,
    ...(opts.startAdbServer === false ? { serverAvailable: () => adbServerListening(opts.adb) } : {}),
    pinFor: (serial) => pins.get(serial),
    onFacts: (serial, physicalId, facts) => {
      // Two phones sharing one identity would look like endless reboots.
      const others = watcher.aliasesOf(physicalId).filter((s) => s !== serial).map((s) => watcher.device(s)?.facts.bootId);
      if (others.every((b) => !b || b === facts.bootId)) history.observeBoot(physicalId, serial, facts.bootId);
    },
    onDuplicate: (serial, physicalId, duplicate) => {
      if (duplicate) history.record({ physicalId, serial, kind: "duplicate-identity", detail: "another phone presents the same identity with a different boot id" });
    },
  });
  watcher.start();
  const reports = new UnresolvedReports(watcher, (physicalId) => journal.unknownIds(physicalId));
  const ownership = new DeviceOwnership({ lockDir, journal, watcher, history, agentId: identity.id, log, onUnresolvedChange: (physicalId) => reports.changed(physicalId) });
  const recovered = ownership.recoverOrphans();
  if (recovered > 0) log.warn("actions in flight when their agent stopped are now unresolved", { count: recovered });
  const jobs = new DeviceJobs(opts.adb, (physicalId) => journal.unresolvedIds(physicalId));
  const transport = coordinatorTransport(opts.coordinatorUrl, opts.token, { caFile: opts.caFile, insecure: opts.insecure });
  if (opts.insecure && !opts.coordinatorUrl.startsWith("https:")) log.warn("--insecure: the agent token may cross the network in cleartext");
  const agentInfo = { id: identity.id, host: hostname(), version: FARM_VERSION };
  const devicectl = opts.devicectl ? parseDevicectl(opts.devicectl, join(opts.dataDir, "devicectl")) : undefined;
  if (devicectl) await resetDevicectlDir(devicectl);
  const ios = devicectl ? new IosDevices({ tool: devicectl, watcher, log }) : undefined;
  ios?.start();
  const video = new VideoSessions({ adb: opts.adb, dataDir: opts.dataDir, lockDir, transport, watcher, agent: agentInfo, log });
  await video.init();
  const screens = new LiveScreens({ adb: opts.adb, serve: serveScreenOver(transport), log });
  const logcats = new LiveLogcats({ adb: opts.adb, serve: serveLogcatOver(transport), log });
  // adb streams on a connection of their own, with small windows: a stream whose phone reads nothing holds little.
  const adbTransport = coordinatorTransport(opts.coordinatorUrl, opts.token, { caFile: opts.caFile, insecure: opts.insecure, streamWindowBytes: ADB_STREAM_WINDOW_BYTES });
  const adbTunnels = new AdbTunnels({
    adb: opts.adb,
    serve: serveAdbStreamOver(adbTransport),
    spareCalls: true,
    warmTransport: true,
    physicalIdOf: (serial) => watcher.device(serial)?.identity.physicalId,
    log,
    ...(opts.adbTunnelBudgetBytes !== undefined ? { tunnelBudgetBytes: opts.adbTunnelBudgetBytes } : {}),
    ...(opts.adbAgentBudgetBytes !== undefined ? { agentBudgetBytes: opts.adbAgentBudgetBytes } : {}),
    // Streams open only once the uplink is up, after the metrics exist.
    onServiceRefused: (rule) => metrics.adbServiceRefused(rule),
  });
  const serviceDeps: AgentServiceDeps = {
    ownership,
    watcher,
    pins,
    history,
    shell: shellAction(jobs),
    setProp: setPropAction(jobs),
    input: inputAction(jobs),
    reboot: rebootAction(opts.adb, watcher),
    interactiveShell: interactiveShellAction(opts.adb, transport),
    adbTunnels,
    rawAdb: rawAdbAction(),
    cleanup: cleanupAction(opts.adb, adbClient),
    readBaseline: (serial, dirs, signal) => readBaseline(opts.adb, adbClient, serial, dirs, signal),
    screens,
    logcats,
    install: installAction(jobs, adbClient, transport, join(opts.dataDir, "staging")),
    pushFile: pushFileAction(jobs, adbClient, transport, join(opts.dataDir, "staging")),
    log,
    evidence: { adb: opts.adb, transport, stagingDir: join(opts.dataDir, "staging"), agent: agentInfo },
    video,
    drainReason: () => drainReason,
    onDrainRequested: (reason: string) => resolveDrain(reason),
    ...(ios ? { ios } : {}),
    hostPaths: [opts.dataDir, lockDir, tmpdir()],
  };
  let drainReason = "";
  let resolveDrain!: (reason: string) => void;
  const drainRequested = new Promise<string>((resolve) => (resolveDrain = resolve));
  const inflight = new Set<Promise<unknown>>();
  const dispatch = callDispatcher({
    routes: agentRoutes(serviceDeps),
    drainReason: serviceDeps.drainReason,
    log,
    hostPaths: serviceDeps.hostPaths,
    shots: stepShooter({ ownership: serviceDeps.ownership, evidence: serviceDeps.evidence }),
    captures: (serial, step, untilMs) => {
      const r = step.redaction;
      const redactor = createRedactor({ secrets: r?.secrets ?? [], labels: r?.labels ?? [], fields: r?.fields ?? [], headers: r?.headers ?? [], unmaskHeaders: r?.unmaskHeaders ?? [] });
      return beginCaptures({ evidence: serviceDeps.evidence, redactor }, serial, step, untilMs);
    },
  });
  const metrics = agentMetrics({
    watcher,
    draining: () => drainReason !== "",
    videoWorkers: () => video.liveWorkers(),
    history,
    adb: { openStreams: () => adbTunnels.openStreams(), heldBytes: () => adbTunnels.budget.held, peakHeldBytes: () => adbTunnels.budget.peak },
  });
  const metricsUrl = opts.metricsListen ? await metrics.listen(opts.metricsListen) : undefined;
  uplink = new Uplink({
    coordinatorUrl: opts.coordinatorUrl,
    transport,
    agentId: identity.id,
    name,
    heartbeatIntervalMs: opts.heartbeatIntervalMs ?? 5_000,
    watcher,
    log,
    decorate: reports.decorate,
    onStateChange: (attached) => {
      opts.onAttachedChange?.(attached);
      // Without the control stream nobody carries a tunnel's streams: every tunnel closes.
      adbTunnels.linkChanged(attached);
      if (attached) {
        void resumeStagedUploads({ stagingDir: join(opts.dataDir, "staging"), transport, agentId: identity.id, log });
        void video.uploadFinished();
      }
    },
    onCall: (call, cancelled) => {
      const run = dispatch(call, cancelled).then((r) => {
        metrics.command(commandLabel(call.method), r.error ? (r.error.detail?.code ?? "ERROR") : "ok");
        return r;
      });
      inflight.add(run);
      void run.finally(() => inflight.delete(run));
      return run;
    },
  });
  const link = uplink;
  reports.send = (report) => link.sendDeviceReport(report);
  // Other agents sharing the host journal change it too.
  const journalPoll = setInterval(() => {
    ownership.recoverOrphans();
    reports.refresh();
  }, opts.heartbeatIntervalMs ?? 5_000);
  journalPoll.unref();
  link.start();
  log.info("agent started", { name, coordinator: opts.coordinatorUrl, adb: `${opts.adb.host}:${opts.adb.port}`, ...(opts.adbPortSource ? { adbPortFrom: opts.adbPortSource } : {}), ...(metricsUrl ? { metrics: metricsUrl } : {}) });
  return {
    id: identity.id,
    name,
    lockDir,
    metricsUrl,
    drainRequested,
    get attached() {
      return link.attached;
    },
    async drain(reason, timeoutMs) {
      drainReason = reason;
      link.setDraining(reason);
      log.info("draining: no new work; waiting for running commands", { reason, running: inflight.size, timeoutMs });
      const settled = Promise.allSettled([...inflight]);
      const timedOut = await Promise.race([settled.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), timeoutMs).unref())]);
      const unfinished = timedOut ? inflight.size : 0;
      if (unfinished > 0) log.warn("drain timeout: commands still running are abandoned", { unfinished });
      else log.info("drained: no command running");
      return { unfinished };
    },
    async close() {
      await metrics.close();
      // Recording workers are detached and finish on their own.
      video.close();
      ios?.stop();
      watcher.stop();
      clearInterval(journalPoll);
      // Settled in the journal before it closes.
      await adbTunnels.stopAll("the agent is stopping");
      screens.stopAll();
      logcats.stopAll();
      await link.stop();
      database.close();
      hostJournal.close();
      OsLock.closeIdle();
      dataDirLock.release();
      log.info("agent stopped");
    },
  };
}

/** "farm.v1.DeviceService/RunShell" → "runShell": the method's local name, as the coordinator's metrics and activity log name it. */
function commandLabel(method: string): string {
  const name = method.slice(method.lastIndexOf("/") + 1);
  return name.charAt(0).toLowerCase() + name.slice(1);
}

/**
 * Host-wide by default, so every farm process of this OS user on the host
 * (two agents, an agent and a local tool) contends for the same device locks
 * and sees the same journal. A state dir, not /tmp: the journal must survive
 * a reboot of the host.
 */
export function defaultLockDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(env["XDG_STATE_HOME"] || join(homedir(), ".local", "state"), "farm", "locks");
}
