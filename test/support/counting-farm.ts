import { mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { vi } from "vitest";
import type { DescService } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { Errors, farmError } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { methodPath } from "@farm/shared/method-rules";
import { AgentControlService } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { VideoService } from "@farm/shared/gen/farm/v1/video_service_pb";
import type { ServiceRoute } from "@farm/agent/rpc/routes";
import { startCoordinator, type RunningCoordinator } from "@farm/coordinator/coordinator";
import { main } from "@farm/cli/main";
import { attachInProcessAgent, tokenTransport, type ReportedPhone } from "./in-process-agent.js";

/** What the CLI printed and returned when run in process. */
export interface CliRun {
  exitCode: number;
  json: Record<string, unknown>;
}

/**
 * A real coordinator in process and an in-process agent whose device
 * services (every method the agent serves: device, video, evidence,
 * control) only count what reaches them, then fail. For argument matrices:
 * a refusal must leave `reached` empty and the disk as it was.
 */
export interface CountingFarm {
  /** The test's own temp dir: the coordinator's data dir is `data` in it; `out` is for the CLI's output dirs. */
  dir: string;
  coordinator: RunningCoordinator;
  /** Every call that reached the agent: `package.Service/Method serial`. */
  reached: string[];
  /** The CLI's environment: this coordinator, an operator's token, a private FARM_HOME. */
  env: NodeJS.ProcessEnv;
  /** `farm ARGS -o json` in process. */
  cli(args: string[], env?: NodeJS.ProcessEnv): Promise<CliRun>;
  /** Every file and directory under the temp dir but the coordinator's database files. */
  files(): Promise<string[]>;
  stop(): Promise<void>;
}

const AGENT_SERVICES: DescService[] = [DeviceService, VideoService, EvidenceService, AgentControlService];

/** Routes for every method of the agent's services: each call is noted, then refused as an agent that does nothing would. */
function countingRoutes(reached: string[]): ServiceRoute[] {
  return AGENT_SERVICES.map((service) => ({
    service,
    impl: Object.fromEntries(service.methods.map((m) => [m.localName, (req: { target?: { serial?: string } }) => {
      reached.push(`${methodPath(m)} ${req.target?.serial ?? ""}`);
      throw farmError(Errors.NOT_IMPLEMENTED, "this agent only counts calls");
    }])),
  })) as unknown as ServiceRoute[];
}

export async function startCountingFarm(name: string, phones: ReportedPhone[]): Promise<CountingFarm> {
  const dir = await mkdtemp(join(tmpdir(), `farm-${name}-`));
  await mkdir(join(dir, "out"));
  const stop = new AbortController();
  const reached: string[] = [];
  const coordinator = await startCoordinator({ listen: { host: "127.0.0.1", port: 0 }, dataDir: join(dir, "data"), dashboardDir: null, log: createLogger({ level: "error" }) });
  const user = (await coordinator.tokens.create("alice", "user", "operator")).secret;
  const agentToken = (await coordinator.tokens.create(`${name}-agent`, "agent")).secret;
  await attachInProcessAgent({ baseUrl: coordinator.url, agentToken, agentId: `${name}-agent`, routes: countingRoutes(reached), phones, signal: stop.signal });
  const registry = createClient(RegistryService, tokenTransport(coordinator.url, user));
  for (;;) {
    const devices = (await registry.listDevices({})).devices;
    if (devices.length === phones.length && devices.every((d) => d.properties?.physicalId)) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const env: NodeJS.ProcessEnv = { FARM_HOME: join(dir, "home"), FARM_CONFIG: join(dir, "none.json"), FARM_COORDINATOR: coordinator.url, FARM_TOKEN: user };
  return {
    dir,
    coordinator,
    reached,
    env,
    cli: (args, e = env) => runCli(args, e),
    files: () => filesUnder(dir),
    async stop() {
      stop.abort();
      await coordinator.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** `farm ARGS -o json` through the CLI's own main(), its stdout captured. */
export async function runCli(args: string[], env: NodeJS.ProcessEnv): Promise<CliRun> {
  let out = "";
  const spy = vi.spyOn(process.stdout, "write").mockImplementation((s: string | Uint8Array) => ((out += String(s)), true));
  let exitCode: number;
  try {
    exitCode = await main([...args, "-o", "json"], env);
  } finally {
    spy.mockRestore();
  }
  return { exitCode, json: JSON.parse(out) as Record<string, unknown> };
}

async function filesUnder(root: string): Promise<string[]> {
  const all = await readdir(root, { recursive: true, withFileTypes: true });
  return all
    .map((e) => join(e.parentPath, e.name).slice(root.length))
    .filter((p) => !/coordinator\.db/.test(p))
    .sort();
}
