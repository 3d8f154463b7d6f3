import { join } from "node:path";
import { Errors } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { parseListenAddress } from "@farm/shared/listen-address";
import { defaultFarmHome } from "@farm/shared/paths";
import { startCoordinator, type CoordinatorOptions } from "@farm/coordinator/coordinator";
import { ensureTokenFile } from "@farm/coordinator/auth/bootstrap-token";
import { parseFlags } from "../args.js";
import { parseByteSize } from "../byte-size.js";
import { parseDuration } from "../duration.js";
import type { Command } from "../command.js";
import { untilStopped } from "../service-run.js";
import { applyLogLevel, flagOrFile, intSetting, loadServiceConfig, setting } from "../service-config.js";

const configKeys = { listen: "string", dataDir: "string", heartbeatMisses: "number", tlsCert: "string", tlsKey: "string", insecure: "boolean", logLevel: "string", evidenceQuota: "string",
  requestTimeoutMs: "number", idleTimeoutMs: "number", maxStreamsPerConnection: "number", maxStreamsPerPrincipal: "number", blobQuota: "string" } as const;

export const coordinatorCommand: Command = {
  name: "coordinator",
  summary: "Run the coordinator service",
  usage: "farm coordinator [--config FILE] [--listen HOST:PORT] [--data-dir DIR] [--heartbeat-misses N] [--tls-cert PEM --tls-key PEM] [--insecure] [--evidence-quota SIZE] [--blob-quota SIZE] [--request-timeout DURATION] [--idle-timeout DURATION] [--max-streams-per-connection N] [--max-streams-per-principal N] [--log-level LEVEL]",
  options: {
    config: { type: "string" },
    listen: { type: "string" },
    "data-dir": { type: "string" },
    "heartbeat-misses": { type: "string" },
    "tls-cert": { type: "string" },
    "tls-key": { type: "string" },
    insecure: { type: "boolean" },
    "evidence-quota": { type: "string" },
    "blob-quota": { type: "string" },
    "request-timeout": { type: "string" },
    "idle-timeout": { type: "string" },
    "max-streams-per-connection": { type: "string" },
    "max-streams-per-principal": { type: "string" },
    "log-level": { type: "string" },
    help: { type: "boolean", short: "h" },
  },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const file = loadServiceConfig(setting(parsed, "config", ctx.env["FARM_COORDINATOR_CONFIG"], undefined), configKeys);
    applyLogLevel(parsed, ctx.env, file["logLevel"]);
    const listen = parseListenAddress(setting(parsed, "listen", undefined, file["listen"]) ?? "127.0.0.1:7420");
    const dataDir = setting(parsed, "data-dir", undefined, file["dataDir"]) ?? join(defaultFarmHome(ctx.env), "coordinator");
    const misses = intSetting(setting(parsed, "heartbeat-misses", undefined, file["heartbeatMisses"]), "heartbeat-misses", 1, 100) ?? 3;
    const certFile = setting(parsed, "tls-cert", undefined, file["tlsCert"]);
    const keyFile = setting(parsed, "tls-key", undefined, file["tlsKey"]);
    const quota = setting(parsed, "evidence-quota", undefined, file["evidenceQuota"]);
    const limits = coordinatorLimits(parsed, file);
    if ((certFile === undefined) !== (keyFile === undefined)) throw new CliError(Errors.INVALID_ARGUMENT, "TLS needs both --tls-cert and --tls-key", certFile ? "tls-key" : "tls-cert");
    const coordinator = await startCoordinator({
      listen,
      dataDir,
      heartbeatMisses: misses,
      insecure: flagOrFile(parsed, "insecure", file["insecure"]),
      ...(quota !== undefined ? { evidenceQuotaBytes: parseByteSize(quota, "evidence-quota") } : {}),
      ...limits,
      ...(certFile && keyFile ? { tls: { certFile, keyFile } } : {}),
    });
    // First start: an admin token so the operator can create the others.
    const adminTokenFile = join(dataDir, "admin.token");
    if (coordinator.tokens.count() === 0) {
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
    ctx.printer.result({ url: coordinator.url, dataDir, adminTokenFile, tls: certFile !== undefined }, () =>
      [`coordinator listening on ${coordinator.url}`, `data dir: ${dataDir}`, `admin token (first start): ${adminTokenFile}`].join("\n"),
    );
    await untilStopped(ctx.stopSignal);
    process.off("SIGHUP", onHup);
    await coordinator.close();
    return 0;
  },
};

/** Connection timeouts, stream caps and the blob quota, from flags or the config file. */
function coordinatorLimits(parsed: Parameters<typeof setting>[0], file: Record<string, string | number | boolean>): Pick<CoordinatorOptions, "connectionLimits" | "maxStreamsPerPrincipal" | "blobQuotaBytes"> {
  const requestTimeout = timeoutSetting(parsed, "request-timeout", file["requestTimeoutMs"]);
  const idleTimeout = timeoutSetting(parsed, "idle-timeout", file["idleTimeoutMs"]);
  const perConnection = intSetting(setting(parsed, "max-streams-per-connection", undefined, file["maxStreamsPerConnection"]), "max-streams-per-connection", 1, 10_000);
  const perPrincipal = intSetting(setting(parsed, "max-streams-per-principal", undefined, file["maxStreamsPerPrincipal"]), "max-streams-per-principal", 1, 100_000);
  const blobQuota = setting(parsed, "blob-quota", undefined, file["blobQuota"]);
  return {
    connectionLimits: {
      ...(requestTimeout !== undefined ? { requestTimeoutMs: requestTimeout } : {}),
      ...(idleTimeout !== undefined ? { idleTimeoutMs: idleTimeout } : {}),
      ...(perConnection !== undefined ? { maxConcurrentStreams: perConnection } : {}),
    },
    ...(perPrincipal !== undefined ? { maxStreamsPerPrincipal: perPrincipal } : {}),
    ...(blobQuota !== undefined ? { blobQuotaBytes: parseByteSize(blobQuota, "blob-quota") } : {}),
  };
}

/** A timeout: the flag as a duration (1500ms, 10s, 1m), the config file's key in milliseconds. */
function timeoutSetting(parsed: Parameters<typeof setting>[0], flag: string, fileMs: string | number | boolean | undefined): number | undefined {
  const text = parsed.values[flag];
  const ms = typeof text === "string" ? parseDuration(text, flag) : typeof fileMs === "number" ? fileMs : undefined;
  if (ms !== undefined && (ms < 100 || ms > 3_600_000)) throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} must be from 100ms to 1h, got ${ms} ms`, flag);
  return ms;
}
