import { join } from "node:path";
import { existsSync } from "node:fs";
import { Errors } from "@farm/shared/errors";
import { parseListenAddress } from "@farm/shared/listen-address";
import { defaultFarmHome } from "@farm/shared/paths";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { startAgent } from "@farm/agent/agent";
import { adbPortSource, adbServerAddress } from "../adb-address.js";
import { CliError } from "../cli-error.js";
import { serviceClient } from "@farm/client/transport";
import { readTokenFile } from "@farm/client/config";
import { applyLogLevel } from "../service-config.js";
import { untilStopped } from "../service-run.js";
import { clientSession } from "../session.js";
import type { agentDrainOptions, agentRemoveOptions, agentRunOptions } from "../tree/agent-commands.js";
import type { Action } from "../tree/spec.js";

const DEFAULT_DRAIN_TIMEOUT_S = 30;

/** `farm agent run` (and the old `farm agent --coordinator URL …`): serves this host's phones until stopped or drained. */
export const runAgent: Action<typeof agentRunOptions> = async ({ opts, sources, ctx }) => {
  applyLogLevel(opts.logLevel);
  const coordinatorUrl = opts.coordinator;
  if (!coordinatorUrl) throw new CliError(Errors.INVALID_ARGUMENT, "--coordinator URL is required", "coordinator");
  const dataDir = opts.dataDir ?? join(defaultFarmHome(ctx.env), "agent");
  const token = agentToken(opts.tokenFile, ctx.env, dataDir);
  const adb = adbServerAddress(opts);
  const agent = await startAgent({
    coordinatorUrl,
    token,
    dataDir,
    adb,
    adbPortSource: adbPortSource(sources.adbPort),
    heartbeatIntervalMs: opts.heartbeatInterval ?? 5_000,
    startAdbServer: !opts.noAdbStart,
    insecure: opts.insecure,
    // iOS devices need Apple's devicectl (macOS hosts); a stand-in with the same command line works too.
    ...(opts.caFile ? { caFile: opts.caFile } : {}),
    ...(opts.devicectl ? { devicectl: opts.devicectl } : {}),
    ...(opts.metricsListen ? { metricsListen: parseListenAddress(opts.metricsListen, "metrics-listen") } : {}),
    ...(opts.lockDir ? { lockDir: opts.lockDir } : {}),
    ...(opts.name ? { name: opts.name } : {}),
    ...(opts.adbTunnelBudget !== undefined ? { adbTunnelBudgetBytes: opts.adbTunnelBudget } : {}),
    ...(opts.adbAgentBudget !== undefined ? { adbAgentBudgetBytes: opts.adbAgentBudget } : {}),
  });
  ctx.printer.result({ agentId: agent.id, name: agent.name, dataDir, metricsUrl: agent.metricsUrl ?? null }, () => `agent ${agent.name} (${agent.id}) started`);
  // SIGTERM (systemctl stop) and a remote `farm agent drain` end the same way.
  const reason = await Promise.race([untilStopped(ctx.stopSignal).then(() => "stopping (SIGTERM/SIGINT)"), agent.drainRequested]);
  await agent.drain(reason, (opts.drainTimeout ?? DEFAULT_DRAIN_TIMEOUT_S) * 1000);
  await agent.close();
  return 0;
};

export const drainAgent: Action<typeof agentDrainOptions> = async (input) => {
  const [name] = input.args as [string];
  const session = clientSession(input);
  const res = await serviceClient(RegistryService, session.config).drainAgent({ agent: name, reason: input.opts.reason ?? "" }, { timeoutMs: session.timeoutMs });
  const a = res.agent;
  input.ctx.printer.result({ agent: { id: a?.id, name: a?.name, draining: a?.draining, drainReason: a?.drainReason } }, () => `agent ${a?.name} is draining: ${a?.drainReason}`);
  return 0;
};

export const removeAgent: Action<typeof agentRemoveOptions> = async (input) => {
  const [name] = input.args as [string];
  const session = clientSession(input);
  const res = await serviceClient(RegistryService, session.config).removeAgent({ agent: name }, { timeoutMs: session.timeoutMs });
  const a = res.agent;
  input.ctx.printer.result({ agent: { id: a?.id, name: a?.name }, removedDevices: res.removedDevices }, () => `agent ${a?.name} (${a?.id}) removed with ${res.removedDevices} device(s)`);
  return 0;
};

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
