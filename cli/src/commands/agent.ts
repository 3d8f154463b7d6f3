import { join } from "node:path";
import { existsSync } from "node:fs";
import { Errors } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { parseListenAddress } from "@farm/shared/listen-address";
import { defaultFarmHome } from "@farm/shared/paths";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { startAgent } from "@farm/agent/agent";
import { parseFlags, stringFlag, type Parsed } from "../args.js";
import { serviceClient } from "../client.js";
import { clientOptions, type Command, type CommandContext } from "../command.js";
import { readTokenFile } from "../config.js";
import { untilStopped } from "../service-run.js";
import { clientSession } from "../session.js";
import { applyLogLevel, flagOrFile, intSetting, loadServiceConfig, setting } from "../service-config.js";
import { adbServerAddress } from "../adb-address.js";

const configKeys = {
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
} as const;

const DEFAULT_DRAIN_TIMEOUT_S = 30;

export const agentCommand: Command = {
  name: "agent",
  summary: "Run the agent for the phones on this host (`farm agent drain NAME` drains one remotely, `farm agent remove NAME` forgets a detached one)",
  usage:
    "farm agent [--config FILE] --coordinator URL [--data-dir DIR] [--token-file F] [--name NAME] [--adb-host H] [--adb-port N] [--no-adb-start] [--heartbeat-interval MS] [--lock-dir DIR] [--ca-file PEM] [--insecure] [--metrics-listen HOST:PORT] [--drain-timeout S] [--log-level LEVEL] [--devicectl CMD]\n       farm agent drain NAME [--reason TEXT]\n       farm agent remove NAME   (admin: forgets a detached agent, its devices and alias claims)",
  options: {
    ...clientOptions,
    config: { type: "string" },
    "data-dir": { type: "string" },
    name: { type: "string" },
    "adb-host": { type: "string" },
    "adb-port": { type: "string" },
    "heartbeat-interval": { type: "string" },
    "no-adb-start": { type: "boolean" },
    "lock-dir": { type: "string" },
    "metrics-listen": { type: "string" },
    "drain-timeout": { type: "string" },
    "log-level": { type: "string" },
    devicectl: { type: "string" },
    reason: { type: "string" },
  },
  positionals: true,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options, true);
    const [sub, ...rest] = parsed.positionals;
    if (sub === "drain") return drainRemote(ctx, parsed, rest);
    if (sub === "remove") return removeRemote(ctx, parsed, rest);
    if (sub !== undefined) throw new CliError(Errors.INVALID_ARGUMENT, `unknown subcommand "${sub}"; run the agent with flags only, or \`farm agent drain|remove NAME\``, "subcommand");
    return runAgent(ctx, parsed);
  },
};

async function runAgent(ctx: CommandContext, parsed: Parsed): Promise<number> {
  const file = loadServiceConfig(setting(parsed, "config", ctx.env["FARM_AGENT_CONFIG"], undefined), configKeys);
  applyLogLevel(parsed, ctx.env, file["logLevel"]);
  const coordinatorUrl = setting(parsed, "coordinator", ctx.env["FARM_COORDINATOR"], file["coordinator"]);
  if (!coordinatorUrl) throw new CliError(Errors.INVALID_ARGUMENT, "--coordinator URL is required", "coordinator");
  const dataDir = setting(parsed, "data-dir", undefined, file["dataDir"]) ?? join(defaultFarmHome(ctx.env), "agent");
  const token = agentToken(setting(parsed, "token-file", undefined, file["tokenFile"]), ctx.env, dataDir);
  const adb = adbServerAddress(parsed, ctx.env, file);
  const heartbeatIntervalMs = intSetting(setting(parsed, "heartbeat-interval", undefined, file["heartbeatInterval"]), "heartbeat-interval", 50, 600_000) ?? 5_000;
  const drainTimeoutS = intSetting(setting(parsed, "drain-timeout", undefined, file["drainTimeout"]), "drain-timeout", 0, 3_600) ?? DEFAULT_DRAIN_TIMEOUT_S;
  const metricsListen = setting(parsed, "metrics-listen", undefined, file["metricsListen"]);
  const name = setting(parsed, "name", undefined, file["name"]);
  const lockDir = setting(parsed, "lock-dir", undefined, file["lockDir"]);
  const caFile = setting(parsed, "ca-file", ctx.env["FARM_CA_FILE"], file["caFile"]);
  // iOS devices need Apple's devicectl (macOS hosts); a stand-in with the same command line works too.
  const devicectl = setting(parsed, "devicectl", ctx.env["FARM_DEVICECTL"], file["devicectl"]);
  const agent = await startAgent({
    coordinatorUrl,
    token,
    dataDir,
    adb,
    heartbeatIntervalMs,
    startAdbServer: parsed.values["no-adb-start"] !== true && file["adbStart"] !== false,
    insecure: flagOrFile(parsed, "insecure", file["insecure"]),
    ...(caFile ? { caFile } : {}),
    ...(devicectl ? { devicectl } : {}),
    ...(metricsListen ? { metricsListen: parseListenAddress(metricsListen, "metrics-listen") } : {}),
    ...(lockDir ? { lockDir } : {}),
    ...(name ? { name } : {}),
  });
  ctx.printer.result({ agentId: agent.id, name: agent.name, dataDir, metricsUrl: agent.metricsUrl ?? null }, () => `agent ${agent.name} (${agent.id}) started`);
  // SIGTERM (systemctl stop) and a remote `farm agent drain` end the same way.
  const reason = await Promise.race([untilStopped(ctx.stopSignal).then(() => "stopping (SIGTERM/SIGINT)"), agent.drainRequested]);
  await agent.drain(reason, drainTimeoutS * 1000);
  await agent.close();
  return 0;
}

async function drainRemote(ctx: CommandContext, parsed: Parsed, rest: string[]): Promise<number> {
  const [name, ...extra] = rest;
  if (!name || extra.length > 0) throw new CliError(Errors.INVALID_ARGUMENT, "expected exactly one agent NAME (or id)", "agent");
  const session = clientSession(ctx, parsed);
  const res = await serviceClient(RegistryService, session.config).drainAgent({ agent: name, reason: stringFlag(parsed, "reason") ?? "" }, { timeoutMs: session.timeoutMs });
  const a = res.agent;
  ctx.printer.result({ agent: { id: a?.id, name: a?.name, draining: a?.draining, drainReason: a?.drainReason } }, () => `agent ${a?.name} is draining: ${a?.drainReason}`);
  return 0;
}

async function removeRemote(ctx: CommandContext, parsed: Parsed, rest: string[]): Promise<number> {
  const [name, ...extra] = rest;
  if (!name || extra.length > 0) throw new CliError(Errors.INVALID_ARGUMENT, "expected exactly one agent NAME (or id)", "agent");
  const session = clientSession(ctx, parsed);
  const res = await serviceClient(RegistryService, session.config).removeAgent({ agent: name }, { timeoutMs: session.timeoutMs });
  const a = res.agent;
  ctx.printer.result({ agent: { id: a?.id, name: a?.name }, removedDevices: res.removedDevices }, () => `agent ${a?.name} (${a?.id}) removed with ${res.removedDevices} device(s)`);
  return 0;
}

/** Agent credentials: --token-file (or the config's tokenFile) > FARM_AGENT_TOKEN > <data-dir>/agent.token. */
function agentToken(tokenFile: string | undefined, env: NodeJS.ProcessEnv, dataDir: string): string {
  if (tokenFile) return readTokenFile(tokenFile, "token-file");
  const fromEnv = env["FARM_AGENT_TOKEN"]?.trim();
  if (fromEnv) return fromEnv;
  const inDataDir = join(dataDir, "agent.token");
  if (existsSync(inDataDir)) return readTokenFile(inDataDir, "token-file");
  throw new CliError(
    Errors.UNAUTHENTICATED,
    `no agent token: pass --token-file, set FARM_AGENT_TOKEN, or put it in ${inDataDir} (create one with \`farm token create --kind agent --name NAME\`)`,
    "token-file",
  );
}
