import { hostname } from "node:os";
import { createLogger, type Logger } from "@farm/shared/log";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import { createAdbClient, type AdbServerAddress } from "./adb-client.js";
import { loadAgentIdentity } from "./agent-identity.js";
import { DeviceWatcher } from "./device-watcher.js";
import { adbServerListening } from "./adb-probe.js";
import { Uplink } from "./uplink.js";

export interface AgentOptions {
  coordinatorUrl: string;
  token: string;
  dataDir: string;
  adb: AdbServerAddress;
  name?: string;
  heartbeatIntervalMs?: number;
  /** Start the adb server when it is not running (adb's own behaviour). Default true. */
  startAdbServer?: boolean;
  log?: Logger;
  onAttachedChange?: (attached: boolean) => void;
}

export interface RunningAgent {
  id: string;
  name: string;
  readonly attached: boolean;
  close(): Promise<void>;
}

export async function startAgent(opts: AgentOptions): Promise<RunningAgent> {
  await ensurePrivateDir(opts.dataDir);
  const identity = await loadAgentIdentity(opts.dataDir);
  const name = opts.name ?? hostname();
  const log = (opts.log ?? createLogger({ base: { component: "agent" } })).child({ agentId: identity.id });
  const watcher = new DeviceWatcher({
    adb: createAdbClient(opts.adb),
    server: opts.adb,
    log,
    ...(opts.startAdbServer === false ? { serverAvailable: () => adbServerListening(opts.adb) } : {}),
  });
  watcher.start();
  const uplink = new Uplink({
    coordinatorUrl: opts.coordinatorUrl,
    token: opts.token,
    agentId: identity.id,
    name,
    heartbeatIntervalMs: opts.heartbeatIntervalMs ?? 5_000,
    watcher,
    log,
    ...(opts.onAttachedChange ? { onStateChange: opts.onAttachedChange } : {}),
  });
  uplink.start();
  log.info("agent started", { name, coordinator: opts.coordinatorUrl, adb: `${opts.adb.host}:${opts.adb.port}` });
  return {
    id: identity.id,
    name,
    get attached() {
      return uplink.attached;
    },
    async close() {
      watcher.stop();
      await uplink.stop();
      log.info("agent stopped");
    },
  };
}
