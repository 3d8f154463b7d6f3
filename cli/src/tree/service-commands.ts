import { flag, intIn, oneOf, parsed, text } from "../options/index.js";
import { duration } from "../options/parsers.js";
import { group, leaf } from "./spec.js";

export const standaloneOptions = {
  listen: { ...text("--listen <host:port>", "Loopback address to serve on"), defaultText: "127.0.0.1:7420" },
  dataDir: { ...text("--data-dir <dir>", "State directory"), defaultText: "$FARM_HOME" },
  adbHost: { ...text("--adb-host <host>", "adb server host"), defaultText: "127.0.0.1" },
  adbPort: { ...parsed("--adb-port <port>", "adb server port", intIn(1, 65_535), { env: "ANDROID_ADB_SERVER_PORT" }), defaultText: "5037" },
  heartbeatInterval: { ...parsed("--heartbeat-interval <ms>", "Agent heartbeat interval in milliseconds", intIn(50, 600_000)), defaultText: "5000" },
  noAdbStart: flag("--no-adb-start", "Do not start an adb server"),
  lockDir: text("--lock-dir <dir>", "Host-wide device locks and the ownership journal"),
  evidenceQuota: { ...text("--evidence-quota <size>", "Stored evidence per user: bundles, session files and captures in flight (500M, 10G)"), defaultText: "10G" },
  capturesPerUser: { ...parsed("--captures-per-user <n>", "Evidence captures and recordings one user may have in flight", intIn(1, 1000)), defaultText: "4" },
  cleanup: text("--cleanup <file>", "Clean phones between users: a YAML policy run when each lease ends (README: Cleaning phones between users)"),
};
export const standaloneCommand = leaf({
  name: "standalone",
  summary: "Run coordinator and agent in one process on loopback (single machine)",
  options: standaloneOptions,
  settings: { kind: "none" },
  load: async () => (await import("../commands/standalone.js")).runStandalone,
});

/** The coordinator's --config FILE keys (deploy/config/coordinator.json). */
export const coordinatorConfigKeys = {
  listen: "string",
  dataDir: "string",
  database: "string",
  replicaUrl: "string",
  byteStore: "string",
  heartbeatMisses: "number",
  tlsCert: "string",
  tlsKey: "string",
  insecure: "boolean",
  logLevel: "string",
  evidenceQuota: "string",
  capturesPerUser: "number",
  requestTimeoutMs: "number",
  idleTimeoutMs: "number",
  maxStreamsPerConnection: "number",
  maxStreamsPerPrincipal: "number",
  blobQuota: "string",
  adbTunnelsPerUser: "number",
  adbStreamsPerTunnel: "number",
  adbIdleTimeoutMs: "number",
  ocrWorkers: "number",
  ocrQueue: "number",
  defaultCapture: "string",
  cleanup: "string",
  redactLabels: "string",
  redactFields: "string",
  redactHeaders: "string",
  unmaskHeaders: "string",
} as const;

/** A timeout: the flag as a duration, the config file's key in milliseconds. */
const msFromConfig = (v: unknown) => (typeof v === "number" ? v : undefined);

export const coordinatorOptions = {
  config: text("--config <file>", "JSON config file; keys are the flags in camelCase (deploy/config/coordinator.json)", { env: "FARM_COORDINATOR_CONFIG" }),
  listen: { ...text("--listen <host:port>", "Address to serve on", { config: "listen" }), defaultText: "127.0.0.1:7420" },
  dataDir: { ...text("--data-dir <dir>", "State directory", { config: "dataDir" }), defaultText: "$FARM_HOME/coordinator" },
  database: {
    ...text("--database <url>", "postgres://user@host/db shared by replicas (the password from the URL or PGPASSWORD), or a SQLite file", { env: "FARM_DATABASE", config: "database" }),
    defaultText: "<data-dir>/coordinator.db",
  },
  replicaUrl: {
    ...text("--replica-url <url>", "With a postgres:// database: where the other replicas reach this one", { env: "FARM_REPLICA_URL", config: "replicaUrl" }),
    defaultText: "the URL it listens on",
  },
  byteStore: {
    ...parsed("--byte-store <where>", "Where evidence, session images and uploads are kept: files (under --data-dir; a shared mount for replicas) or database", oneOf(["files", "database"] as const), {
      env: "FARM_BYTE_STORE",
      config: "byteStore",
      choices: ["files", "database"],
    }),
    defaultText: "database on postgres://, else files",
  },
  heartbeatMisses: { ...parsed("--heartbeat-misses <n>", "Missed heartbeats before an agent is offline", intIn(1, 100), { config: "heartbeatMisses" }), defaultText: "3" },
  tlsCert: text("--tls-cert <pem>", "TLS certificate (with --tls-key)", { config: "tlsCert" }),
  tlsKey: text("--tls-key <pem>", "TLS private key", { config: "tlsKey" }),
  insecure: flag("--insecure", "Accept tokens over cleartext from other machines", { config: "insecure" }),
  evidenceQuota: { ...text("--evidence-quota <size>", "Stored evidence per user: bundles, session files and captures in flight (500M, 10G)", { config: "evidenceQuota" }), defaultText: "10G" },
  capturesPerUser: { ...parsed("--captures-per-user <n>", "Evidence captures and recordings one user may have in flight", intIn(1, 1000), { config: "capturesPerUser" }), defaultText: "4" },
  blobQuota: text("--blob-quota <size>", "Uploads in flight per token (APKs)", { config: "blobQuota" }),
  adbTunnelsPerUser: { ...parsed("--adb-tunnels-per-user <n>", "Remote adb tunnels one user may have open", intIn(1, 1000), { config: "adbTunnelsPerUser" }), defaultText: "4" },
  adbStreamsPerTunnel: { ...parsed("--adb-streams-per-tunnel <n>", "adb streams open at once in one tunnel", intIn(1, 10_000), { config: "adbStreamsPerTunnel" }), defaultText: "32" },
  adbIdleTimeout: {
    ...parsed("--adb-idle-timeout <duration>", "Close a remote adb tunnel with no stream open for this long (config: adbIdleTimeoutMs)", duration, { config: "adbIdleTimeoutMs", fromConfig: msFromConfig }),
    defaultText: "30m",
  },
  ocrWorkers: { ...parsed("--ocr-workers <n>", "OCR workers for sessions started with --ocr (0: OCR off)", intIn(0, 16), { config: "ocrWorkers" }), defaultText: "1" },
  ocrQueue: { ...parsed("--ocr-queue <n>", "Session steps that may wait for OCR; more are marked skipped", intIn(1, 100_000), { config: "ocrQueue" }), defaultText: "64" },
  redactLabels: text("--redact-labels <list>", "Site redaction, with each session policy's: element labels whose text is masked (comma-separated)", { config: "redactLabels" }),
  redactFields: text("--redact-fields <list>", "Site redaction: JSON field names whose values are masked", { config: "redactFields" }),
  redactHeaders: text("--redact-headers <list>", "Site redaction: header names masked besides the defaults", { config: "redactHeaders" }),
  unmaskHeaders: text("--unmask-headers <list>", "Site redaction: default sensitive headers not to mask", { config: "unmaskHeaders" }),
  cleanup: text("--cleanup <file>", "Clean phones between users: a YAML policy run when each lease ends; a phone whose cleanup fails is needs-attention (README: Cleaning phones between users)", { config: "cleanup" }),
  defaultCapture: text("--default-capture <tokens>", "Site default capture list for session steps (screenshot.before,deviceLog); a policy's own capture wins", { config: "defaultCapture" }),
  requestTimeout: parsed("--request-timeout <duration>", "A request's deadline (config: requestTimeoutMs)", duration, { config: "requestTimeoutMs", fromConfig: msFromConfig }),
  idleTimeout: parsed("--idle-timeout <duration>", "Close idle connections after this long (config: idleTimeoutMs)", duration, { config: "idleTimeoutMs", fromConfig: msFromConfig }),
  maxStreamsPerConnection: parsed("--max-streams-per-connection <n>", "Concurrent streams of one connection", intIn(1, 10_000), { config: "maxStreamsPerConnection" }),
  maxStreamsPerPrincipal: parsed("--max-streams-per-principal <n>", "Concurrent streams of one token", intIn(1, 100_000), { config: "maxStreamsPerPrincipal" }),
  logLevel: text("--log-level <level>", "debug, info, warn or error", { env: "FARM_LOG_LEVEL", config: "logLevel", choices: ["debug", "info", "warn", "error"] }),
};
export const coordinatorRun = leaf({
  name: "run",
  summary: "Run the coordinator service (also `farm coordinator --config FILE`)",
  options: coordinatorOptions,
  settings: { kind: "service", option: "config", env: "FARM_COORDINATOR_CONFIG", keys: coordinatorConfigKeys },
  examples: [
    "farm coordinator --config /etc/farm/coordinator.json",
    "farm coordinator --listen 0.0.0.0:7420 --tls-cert server.pem --tls-key server.key",
    "farm coordinator --database postgres://farm@db.lab/farm --listen 0.0.0.0:7420",
    "farm coordinator --cleanup /etc/farm/cleanup.yaml",
  ],
  load: async () => (await import("../commands/coordinator.js")).runCoordinator,
});

export const coordinatorMigrateOptions = {
  config: coordinatorOptions.config,
  dataDir: coordinatorOptions.dataDir,
  database: coordinatorOptions.database,
};
export const coordinatorMigrate = leaf({
  name: "migrate",
  summary: "Bring the coordinator's database to this version's schema and exit (before a rolling upgrade of replicas)",
  options: coordinatorMigrateOptions,
  settings: { kind: "service", option: "config", env: "FARM_COORDINATOR_CONFIG", keys: coordinatorConfigKeys },
  examples: ["farm coordinator migrate --database postgres://farm@db.lab/farm"],
  load: async () => (await import("../commands/coordinator-migrate.js")).migrateCoordinator,
});

export const coordinatorCommand = group({
  name: "coordinator",
  summary: "The coordinator service: run it, or migrate its database (`farm coordinator` with flags only runs it)",
  defaultCommand: "run",
  commands: [coordinatorRun, coordinatorMigrate],
});
