import { parseByteSize } from "../byte-size.js";
import { clientOptions } from "../options/common-options.js";
import { flag, intIn, parsed, text } from "../options/index.js";
import { group, leaf } from "./spec.js";

/** The agent's --config FILE keys: its flags in camelCase. */
export const agentConfigKeys = {
  coordinator: "string",
  dataDir: "string",
  tokenFile: "string",
  name: "string",
  adbHost: "string",
  adbPort: "number",
  adbStart: "boolean",
  heartbeatInterval: "number",
  lockDir: "string",
  caFile: "string",
  insecure: "boolean",
  metricsListen: "string",
  drainTimeout: "number",
  logLevel: "string",
  devicectl: "string",
  adbTunnelBudget: "string",
  adbAgentBudget: "string",
} as const;

export const agentRunOptions = {
  config: text("--config <file>", "JSON config file; keys are the flags in camelCase (deploy/config/agent.json)", { env: "FARM_AGENT_CONFIG" }),
  coordinator: text("--coordinator <url>", "Coordinator URL (required)", { env: "FARM_COORDINATOR", config: "coordinator" }),
  dataDir: { ...text("--data-dir <dir>", "The agent's state directory", { config: "dataDir" }), defaultText: "$FARM_HOME/agent" },
  tokenFile: { ...text("--token-file <file>", "The agent token (FARM_AGENT_TOKEN holds the token itself)", { config: "tokenFile" }), defaultText: "<data-dir>/agent.token" },
  name: { ...text("--name <name>", "Agent name shown in farm agents and used by --agent", { config: "name" }), defaultText: "the host name" },
  adbHost: { ...text("--adb-host <host>", "adb server host", { config: "adbHost" }), defaultText: "127.0.0.1" },
  adbPort: { ...parsed("--adb-port <port>", "adb server port", intIn(1, 65_535), { env: "ANDROID_ADB_SERVER_PORT", config: "adbPort" }), defaultText: "5037" },
  noAdbStart: flag("--no-adb-start", "Do not start an adb server (config: adbStart false)", { fromConfig: (v) => (v === false ? true : v === true ? false : undefined) }),
  heartbeatInterval: { ...parsed("--heartbeat-interval <ms>", "Heartbeat interval in milliseconds", intIn(50, 600_000), { config: "heartbeatInterval" }), defaultText: "5000" },
  lockDir: { ...text("--lock-dir <dir>", "Host-wide device locks and the ownership journal", { config: "lockDir" }), defaultText: "$XDG_STATE_HOME/farm/locks" },
  caFile: text("--ca-file <pem>", "PEM CA bundle to verify the coordinator with", { env: "FARM_CA_FILE", config: "caFile" }),
  insecure: flag("--insecure", "Allow the token over cleartext to a non-loopback coordinator", { config: "insecure" }),
  metricsListen: text("--metrics-listen <host:port>", "Serve Prometheus metrics there", { config: "metricsListen" }),
  drainTimeout: { ...parsed("--drain-timeout <s>", "Seconds running commands may take to finish on stop or drain", intIn(0, 3_600), { config: "drainTimeout" }), defaultText: "30" },
  logLevel: text("--log-level <level>", "debug, info, warn or error", { env: "FARM_LOG_LEVEL", config: "logLevel", choices: ["debug", "info", "warn", "error"] }),
  devicectl: text("--devicectl <cmd>", "Apple's devicectl (or a stand-in) for iOS devices", { env: "FARM_DEVICECTL", config: "devicectl" }),
  adbTunnelBudget: {
    ...parsed("--adb-tunnel-budget <size>", "Bytes one remote adb tunnel's streams may hold in the agent (e.g. 8M); past it they wait", parseByteSize, { config: "adbTunnelBudget" }),
    defaultText: "4M",
  },
  adbAgentBudget: {
    ...parsed("--adb-agent-budget <size>", "Bytes all remote adb streams may hold in the agent (e.g. 32M); past it they wait", parseByteSize, { config: "adbAgentBudget" }),
    defaultText: "16M",
  },
};
export const agentRun = leaf({
  name: "run",
  summary: "Run the agent for the phones on this host (also `farm agent --coordinator URL …`)",
  options: agentRunOptions,
  settings: { kind: "service", option: "config", env: "FARM_AGENT_CONFIG", keys: agentConfigKeys },
  examples: ["farm agent run --config /etc/farm/agent.json", "farm agent --coordinator https://coordinator.lab:7420 --ca-file ca.pem"],
  load: async () => (await import("../commands/agent.js")).runAgent,
});

export const agentListOptions = clientOptions;
export const agentList = leaf({
  name: "list",
  summary: "List agents, online and offline (wide: also protocol and adb versions, connection time, drain reason)",
  options: agentListOptions,
  load: async () => (await import("../commands/agents.js")).listAgents,
});

export const agentDrainOptions = { ...clientOptions, reason: text("--reason <text>", "Why, shown in farm agents") };
export const agentRemoveOptions = clientOptions;
export const agentGroup = group({
  name: "agent",
  summary: "Agents: list, run, drain, remove (`farm agent` with flags only runs the agent)",
  defaultCommand: "run",
  commands: [
    agentList,
    agentRun,
    leaf({
      name: "drain",
      summary: "Drain an agent remotely: no new leases, running work finishes, then it exits (admin)",
      args: [{ name: "agent", description: "Agent name or id", required: true }],
      options: agentDrainOptions,
      load: async () => (await import("../commands/agent.js")).drainAgent,
    }),
    leaf({
      name: "remove",
      summary: "Forget a detached agent, its devices and alias claims (admin)",
      args: [{ name: "agent", description: "Agent name or id", required: true }],
      options: agentRemoveOptions,
      load: async () => (await import("../commands/agent.js")).removeAgent,
    }),
  ],
});
