import { join } from "node:path";
import { existsSync } from "node:fs";
import { CliError, ErrorCodes } from "@farm/shared/errors";
import { defaultFarmHome } from "@farm/shared/paths";
import { startAgent } from "@farm/agent/agent";
import { intFlag, parseFlags, stringFlag } from "../args.js";
import type { Command } from "../command.js";
import { readTokenFile } from "../config.js";
import { untilStopped } from "../service-run.js";
import { adbServerAddress } from "../adb-address.js";

export const agentCommand: Command = {
  name: "agent",
  summary: "Run the agent for the phones on this host",
  usage:
    "farm agent --coordinator URL [--data-dir DIR] [--token-file F] [--name NAME] [--adb-host H] [--adb-port N] [--heartbeat-interval MS] [--no-adb-start] [--lock-dir DIR]",
  options: {
    coordinator: { type: "string" },
    "data-dir": { type: "string" },
    "token-file": { type: "string" },
    name: { type: "string" },
    "adb-host": { type: "string" },
    "adb-port": { type: "string" },
    "heartbeat-interval": { type: "string" },
    "no-adb-start": { type: "boolean" },
    "lock-dir": { type: "string" },
    help: { type: "boolean", short: "h" },
  },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const coordinatorUrl = stringFlag(parsed, "coordinator") ?? ctx.env["FARM_COORDINATOR"];
    if (!coordinatorUrl) throw new CliError(ErrorCodes.invalidArgument, "--coordinator URL is required", "coordinator");
    const dataDir = stringFlag(parsed, "data-dir") ?? join(defaultFarmHome(ctx.env), "agent");
    const token = agentToken(stringFlag(parsed, "token-file"), ctx.env, dataDir);
    const adb = adbServerAddress(parsed, ctx.env);
    const heartbeatIntervalMs = intFlag(parsed, "heartbeat-interval", 50, 600_000) ?? 5_000;
    const name = stringFlag(parsed, "name");
    const agent = await startAgent({
      coordinatorUrl,
      token,
      dataDir,
      adb,
      heartbeatIntervalMs,
      startAdbServer: parsed.values["no-adb-start"] !== true,
      ...(stringFlag(parsed, "lock-dir") ? { lockDir: stringFlag(parsed, "lock-dir") as string } : {}),
      ...(name ? { name } : {}),
    });
    ctx.printer.result({ agentId: agent.id, name: agent.name, dataDir }, () => `agent ${agent.name} (${agent.id}) started`);
    await untilStopped(ctx.stopSignal);
    await agent.close();
    return 0;
  },
};

/** Agent credentials: --token-file > FARM_AGENT_TOKEN > <data-dir>/agent.token. */
function agentToken(tokenFile: string | undefined, env: NodeJS.ProcessEnv, dataDir: string): string {
  if (tokenFile) return readTokenFile(tokenFile, "token-file");
  const fromEnv = env["FARM_AGENT_TOKEN"]?.trim();
  if (fromEnv) return fromEnv;
  const inDataDir = join(dataDir, "agent.token");
  if (existsSync(inDataDir)) return readTokenFile(inDataDir, "token-file");
  throw new CliError(
    ErrorCodes.unauthenticated,
    `no agent token: pass --token-file, set FARM_AGENT_TOKEN, or put it in ${inDataDir} (create one with \`farm token create --kind agent --name NAME\`)`,
    "token-file",
  );
}
