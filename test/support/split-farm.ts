import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { startAdbServer, type AdbServer } from "../devsim/index.js";
import { farm, startFarm, type FarmProcess } from "./farm-process.js";
import { makeTempDir, type TempDir } from "./temp-dir.js";
import { HEARTBEAT_INTERVAL } from "./heartbeat.js";

/**
 * A lab as deployed: a private adb server, `farm coordinator` and `farm
 * agent` as separate processes (so either can be killed alone), an agent
 * token minted through the CLI, and an admin environment for CLI calls.
 */
export interface SplitFarm {
  dir: TempDir;
  adb: AdbServer;
  coordinator: FarmProcess;
  url: string;
  /** CLI environment with the admin token. */
  env: NodeJS.ProcessEnv;
  agent: FarmProcess;
  agentArgs: string[];
  /** Starts the agent again with the same arguments (after a kill or a drain). */
  restartAgent(): Promise<FarmProcess>;
  /** Stops the agent, the coordinator and adb, and removes the directory. */
  stop(): Promise<void>;
}

/** How to start a split lab. */
export interface SplitFarmOptions {
  agentName?: string;
  agentArgs?: string[];
  /** Extra `farm coordinator` flags (short timeouts, small quotas). */
  coordinatorArgs?: string[];
  /** Environment for the agent process, from the lab's directory. */
  agentEnv?: (dir: TempDir) => NodeJS.ProcessEnv;
  /** Runs after the coordinator is up and before the agent starts. */
  beforeAgent?: (dir: TempDir) => Promise<void>;
}

export async function startSplitFarm(
  name: string,
  opts: SplitFarmOptions = {},
): Promise<SplitFarm> {
  const dir = await makeTempDir(name);
  // What started so far, stopped again if a later step fails (the caller never gets a lab to stop).
  const started: { stop(): Promise<unknown> }[] = [];
  try {
    return await build(opts, dir, started);
  } catch (err) {
    for (const s of started.reverse()) await s.stop().catch(() => undefined);
    await dir.remove().catch(() => undefined);
    throw err;
  }
}

async function build(
  opts: SplitFarmOptions,
  dir: TempDir,
  started: { stop(): Promise<unknown> }[],
): Promise<SplitFarm> {
  const adb = await startAdbServer();
  started.push(adb);
  const coordinator = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", join(dir.path, "coordinator"), ...(opts.coordinatorArgs ?? [])]);
  started.push(coordinator);
  const url = String(coordinator.ready["url"]);
  const admin = (await readFile(String(coordinator.ready["adminTokenFile"]), "utf8")).trim();
  const env = { FARM_COORDINATOR: url, FARM_TOKEN: admin, FARM_HOME: join(dir.path, "home"), FARM_CONFIG: join(dir.path, "none.json") };
  const agentName = opts.agentName ?? "lab";
  const token = await farm(["token", "create", "--kind", "agent", "--name", agentName], env);
  await writeFile(join(dir.path, "agent.token"), String(token.json["token"]), { mode: 0o600 });
  const agentArgs = [
    "agent",
    "--coordinator",
    url,
    "--name",
    agentName,
    "--data-dir",
    join(dir.path, "agent"),
    "--token-file",
    join(dir.path, "agent.token"),
    "--adb-port",
    String(adb.port),
    "--no-adb-start",
    "--lock-dir",
    join(dir.path, "locks"),
    "--heartbeat-interval",
    HEARTBEAT_INTERVAL,
    ...(opts.agentArgs ?? []),
  ];
  await opts.beforeAgent?.(dir);
  const agentEnv = opts.agentEnv?.(dir) ?? {};
  const lab: SplitFarm = {
    dir,
    adb,
    coordinator,
    url,
    env,
    agentArgs,
    agent: await startFarm(agentArgs, agentEnv),
    async restartAgent() {
      lab.agent = await startFarm(agentArgs, agentEnv);
      return lab.agent;
    },
    async stop() {
      await lab.agent.stop();
      await coordinator.stop();
      await adb.stop();
      await dir.remove();
    },
  };
  return lab;
}
