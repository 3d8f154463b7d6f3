import { join } from "node:path";
import { Errors } from "@farm/shared/errors";
import { parseListenAddress } from "@farm/shared/listen-address";
import { defaultFarmHome } from "@farm/shared/paths";
import { startCoordinator, type CoordinatorOptions } from "@farm/coordinator/coordinator";
import { ensureTokenFile } from "@farm/coordinator/auth/bootstrap-token";
import { CliError } from "../cli-error.js";
import { readCleanupPolicy } from "../cleanup-policy-file.js";
import { captureTokenProblem } from "@farm/shared/capture-policy/capture-token";
import { parseByteSize } from "../byte-size.js";
import type { OptionValues } from "../options/option-decl.js";
import { applyLogLevel } from "../service-config.js";
import { untilStopped } from "../service-run.js";
import type { coordinatorOptions } from "../tree/service-commands.js";
import type { Action } from "../tree/spec.js";

type Opts = OptionValues<typeof coordinatorOptions>;

/** `farm coordinator`: every setting from a flag, else the environment where one is bound, else --config FILE. */
export const runCoordinator: Action<typeof coordinatorOptions> = async ({ opts, ctx }) => {
  applyLogLevel(opts.logLevel);
  const listen = parseListenAddress(opts.listen ?? "127.0.0.1:7420");
  const dataDir = opts.dataDir ?? join(defaultFarmHome(ctx.env), "coordinator");
  const certFile = opts.tlsCert;
  const keyFile = opts.tlsKey;
  const limits = coordinatorLimits(opts);
  if ((certFile === undefined) !== (keyFile === undefined)) throw new CliError(Errors.INVALID_ARGUMENT, "TLS needs both --tls-cert and --tls-key", certFile ? "tls-key" : "tls-cert");
  const cleanupPolicy = opts.cleanup === undefined ? undefined : await readCleanupPolicy(opts.cleanup);
  const coordinator = await startCoordinator({
    listen,
    dataDir,
    ...(opts.database ? { database: opts.database } : {}),
    ...(opts.replicaUrl ? { replicaUrl: opts.replicaUrl } : {}),
    ...(opts.byteStore ? { byteStore: opts.byteStore } : {}),
    heartbeatMisses: opts.heartbeatMisses ?? 3,
    insecure: opts.insecure,
    ...(opts.evidenceQuota !== undefined ? { evidenceQuotaBytes: parseByteSize(opts.evidenceQuota, "evidence-quota") } : {}),
    ...(opts.capturesPerUser !== undefined ? { capturesPerUser: opts.capturesPerUser } : {}),
    ...limits,
    ...(cleanupPolicy ? { cleanupPolicy } : {}),
    ...(certFile && keyFile ? { tls: { certFile, keyFile } } : {}),
  });
  // First start: an admin token so the operator can create the others.
  const adminTokenFile = join(dataDir, "admin.token");
  if ((await coordinator.tokens.count()) === 0) {
    await ensureTokenFile(coordinator.tokens, adminTokenFile, { baseName: "admin", kind: "user", role: "admin" });
  }
  // systemctl reload: a renewed certificate without dropping attached agents.
  // Handled without TLS too: Node's default for SIGHUP is to exit.
  const logLine = (level: string, msg: string, fields: Record<string, unknown> = {}) => process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }) + "\n");
  const onHup = () => {
    if (!certFile) return logLine("info", "SIGHUP: nothing to reload (no TLS certificate configured)");
    void coordinator.reloadTls().catch((err: Error) => logLine("error", "TLS reload failed; the old certificate stays", { error: err.message }));
  };
  process.on("SIGHUP", onHup);
  ctx.printer.result({ url: coordinator.url, dataDir, adminTokenFile, tls: certFile !== undefined }, () => [`coordinator listening on ${coordinator.url}`, `data dir: ${dataDir}`, `admin token (first start): ${adminTokenFile}`].join("\n"));
  await untilStopped(ctx.stopSignal);
  process.off("SIGHUP", onHup);
  await coordinator.close();
  return 0;
};

/** A timeout from 100 ms to 1 h (the flag a duration, the config file's key in milliseconds). */
function timeout(ms: number | undefined, flag: string): number | undefined {
  if (ms !== undefined && (ms < 100 || ms > 3_600_000)) throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} must be from 100ms to 1h, got ${ms} ms`, flag);
  return ms;
}

/** Connection timeouts, stream caps, the blob quota and the OCR pool. */
function coordinatorLimits(opts: Opts): Pick<CoordinatorOptions, "connectionLimits" | "maxStreamsPerPrincipal" | "blobQuotaBytes" | "adbTunnels" | "ocr" | "defaultCapture" | "siteRedact"> {
  const names = (v: string | undefined) => (v ?? "").split(",").map((x) => x.trim()).filter(Boolean);
  const requestTimeout = timeout(opts.requestTimeout, "request-timeout");
  const idleTimeout = timeout(opts.idleTimeout, "idle-timeout");
  return {
    connectionLimits: {
      ...(requestTimeout !== undefined ? { requestTimeoutMs: requestTimeout } : {}),
      ...(idleTimeout !== undefined ? { idleTimeoutMs: idleTimeout } : {}),
      ...(opts.maxStreamsPerConnection !== undefined ? { maxConcurrentStreams: opts.maxStreamsPerConnection } : {}),
    },
    ...(opts.maxStreamsPerPrincipal !== undefined ? { maxStreamsPerPrincipal: opts.maxStreamsPerPrincipal } : {}),
    ...(opts.blobQuota !== undefined ? { blobQuotaBytes: parseByteSize(opts.blobQuota, "blob-quota") } : {}),
    adbTunnels: {
      ...(opts.adbTunnelsPerUser !== undefined ? { perUser: opts.adbTunnelsPerUser } : {}),
      ...(opts.adbStreamsPerTunnel !== undefined ? { streamsPerTunnel: opts.adbStreamsPerTunnel } : {}),
      ...(opts.adbIdleTimeout !== undefined ? { idleMs: opts.adbIdleTimeout } : {}),
    },
    ocr: { ...(opts.ocrWorkers !== undefined ? { workers: opts.ocrWorkers } : {}), ...(opts.ocrQueue !== undefined ? { maxQueue: opts.ocrQueue } : {}) },
    ...(opts.defaultCapture !== undefined ? { defaultCapture: siteCapture(opts.defaultCapture) } : {}),
    siteRedact: { labels: names(opts.redactLabels), fields: names(opts.redactFields), headers: names(opts.redactHeaders), unmaskHeaders: names(opts.unmaskHeaders) },
  };
}

/** The site default capture list, each token checked like a policy's. */
function siteCapture(text: string): string[] {
  const tokens = text.split(",").map((t) => t.trim()).filter(Boolean);
  for (const t of tokens) {
    const problem = captureTokenProblem(t);
    if (problem) throw new CliError(Errors.INVALID_ARGUMENT, problem, "default-capture");
  }
  return tokens;
}
