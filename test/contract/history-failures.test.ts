/**
 * History never changes an outcome: with the activity log's writes failing
 * (a trigger on the real SQLite table stands in for a full disk), a routed
 * shell and a remote adb tunnel end as they would have, and each lost entry
 * is logged and counted on /metrics (farm_history_write_failures_total).
 * A real coordinator; an agent that answers the control calls and serves
 * the shell's stream as a real one does.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { createClient, type ServiceImpl, type Transport } from "@connectrpc/connect";
import { AsyncQueue } from "@farm/shared/async-queue";
import { Errors, toErrorReport } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { AdbTunnelService } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { AgentControlService } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { AgentShellService, ServeShellRequestSchema, type ServeShellRequest } from "@farm/shared/gen/farm/v1/agent_shell_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { OpenShellRequestSchema, ShellService, type OpenShellRequest } from "@farm/shared/gen/farm/v1/shell_service_pb";
import type { ServiceRoute } from "@farm/agent/rpc/routes";
import { startCoordinator, type RunningCoordinator } from "@farm/coordinator/coordinator";
import { attachInProcessAgent, tokenTransport } from "../support/in-process-agent.js";

const AGENT_ID = "history-agent";
const SERIAL = "HISTORY1";

let dir: string;
let coordinator: RunningCoordinator;
let tokens: Record<"alice" | "agent", string>;
let lease: string;
const stop = new AbortController();
const logged: { level: string; msg: string; command?: string }[] = [];

const grpc = (token: string, leaseToken?: string): Transport => tokenTransport(coordinator.url, token, leaseToken);

/** The agent's control calls: a shell serves its session over AgentShellService, as the real agent does. */
const controlImpl: Partial<ServiceImpl<typeof AgentControlService>> = {
  startShell: (req) => {
    const out = new AsyncQueue<ServeShellRequest>();
    out.push(create(ServeShellRequestSchema, { kind: { case: "sessionId", value: req.sessionId } }));
    out.push(create(ServeShellRequestSchema, { kind: { case: "output", value: new TextEncoder().encode("hello\n") } }));
    out.push(create(ServeShellRequestSchema, { kind: { case: "exitCode", value: 0 } }));
    out.close();
    void (async () => {
      try {
        for await (const _ of createClient(AgentShellService, grpc(tokens.agent)).serveShell(out, { signal: stop.signal })) void _;
      } catch {
        // The caller's hangup ends it.
      }
    })();
    return { actionId: "act-shell" };
  },
  startAdbTunnel: () => ({ actionId: "act-tunnel" }),
  stopAdbTunnel: () => ({}),
};

async function attachAgent(): Promise<void> {
  await attachInProcessAgent({
    baseUrl: coordinator.url,
    agentToken: tokens.agent,
    agentId: AGENT_ID,
    routes: [{ service: AgentControlService, impl: controlImpl }] as unknown as ServiceRoute[],
    phones: [{ serial: SERIAL }],
    signal: stop.signal,
  });
}

/** The value of farm_history_write_failures_total for a command on /metrics (0 when absent). */
async function lostOnMetrics(command: string): Promise<number> {
  const text = await (await fetch(new URL("/metrics", coordinator.url))).text();
  const line = text.split("\n").find((l) => l.startsWith(`farm_history_write_failures_total{command="${command}"}`));
  return line ? Number(line.split(" ").pop()) : 0;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-history-failures-"));
  const log = createLogger({ level: "error", write: (line) => logged.push(JSON.parse(line) as (typeof logged)[number]) });
  coordinator = await startCoordinator({ listen: { host: "127.0.0.1", port: 0 }, dataDir: join(dir, "data"), dashboardDir: null, log });
  tokens = { alice: (await coordinator.tokens.create("alice", "user", "operator")).secret, agent: (await coordinator.tokens.create(AGENT_ID, "agent")).secret };
  await attachAgent();
  const registry = createClient(RegistryService, grpc(tokens.alice));
  while (!(await registry.listDevices({ agent: AGENT_ID })).devices.some((d) => d.state === "device" && d.properties?.physicalId)) await new Promise((r) => setTimeout(r, 20));
  lease = (await createClient(LeaseService, grpc(tokens.alice)).acquireLease({ selector: { serial: SERIAL }, ttlMs: 600_000 })).token;
  // From here on every activity entry fails to be written, as on a full disk.
  const db = new Database(join(dir, "data", "coordinator.db"));
  db.exec("CREATE TRIGGER activity_full BEFORE INSERT ON activity BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END");
  db.close();
});

afterAll(async () => {
  stop.abort();
  await coordinator?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("a failing activity write", () => {
  it("leaves a routed shell's ok end: its output and exit code, no error; logged and counted", async () => {
    const input = new AsyncQueue<OpenShellRequest>();
    input.push(create(OpenShellRequestSchema, { kind: { case: "start", value: { target: { serial: SERIAL }, term: "xterm" } } }));
    const seen: string[] = [];
    const ended = (async () => {
      for await (const m of createClient(ShellService, grpc(tokens.alice, lease)).openShell(input)) {
        if (m.kind.case === "actionId") seen.push(`action ${m.kind.value}`);
        if (m.kind.case === "output") seen.push(new TextDecoder().decode(m.kind.value));
        if (m.kind.case === "exitCode") {
          seen.push(`exit ${m.kind.value}`);
          input.close();
        }
      }
    })().then(() => undefined, toErrorReport);
    expect(await ended).toBeUndefined();
    expect(seen).toEqual(["action act-shell", "hello\n", "exit 0"]);
    expect(await lostOnMetrics("openShell")).toBe(1);
    expect(logged).toContainEqual(expect.objectContaining({ level: "error", msg: "could not write the activity log; the call's outcome stands", command: "openShell" }));
  });

  it("leaves why a tunnel closed (closed by its owner), not the store's error; logged and counted", async () => {
    const tunnels = createClient(AdbTunnelService, grpc(tokens.alice, lease));
    const stream = tunnels.openTunnel({ target: { serial: SERIAL } })[Symbol.asyncIterator]();
    const opened = await stream.next();
    if (opened.done || opened.value.kind.case !== "opened") throw new Error("no tunnel");
    await tunnels.closeTunnel({ tunnelId: opened.value.kind.value.tunnelId });
    const end = await stream.next().then(() => undefined, toErrorReport);
    expect(end).toMatchObject({ code: Errors.TUNNEL_CLOSED.code, message: "closed by its owner" });
    expect(await lostOnMetrics("adbTunnel")).toBe(1);
    expect(logged).toContainEqual(expect.objectContaining({ level: "error", command: "adbTunnel" }));
  });
});
