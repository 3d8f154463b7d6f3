import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { AgentHelloSchema, DeviceReportSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { createLogger } from "@farm/shared/log";
import { ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { startCoordinator, type RunningCoordinator } from "./coordinator.js";

let dir: string;
let coordinator: RunningCoordinator;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-wiring-"));
  coordinator = await startCoordinator({ listen: { host: "127.0.0.1", port: 0 }, dataDir: join(dir, "data"), log: createLogger({ level: "error" }) });
});

afterAll(async () => {
  await coordinator.close();
  await rm(dir, { recursive: true, force: true });
});

const any = { serial: "", physicalId: "", labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "" };
const settle = () => new Promise<void>((r) => setImmediate(r));

// The coordinator builds the registry, labels and lease manager and connects them; nothing connects itself.
describe("coordinator wiring", () => {
  it("grants a waiting request when a matching device appears in the registry, or gets the labels asked for", async () => {
    const ac = new AbortController();
    const outcome: string[] = [];
    const track = (p: Promise<{ lease: { physicalId: string } }>) => p.then((g) => outcome.push(g.lease.physicalId), (e: unknown) => outcome.push(String(e)));
    void track(coordinator.leases.acquire("ci", { ...any, physicalId: "pd-1" }, { waitMs: 60_000, ttlMs: 60_000, ticket: "", signal: ac.signal }));
    void track(coordinator.leases.acquire("ci", { ...any, labels: { rack: "b2" } }, { waitMs: 60_000, ttlMs: 60_000, ticket: "", signal: ac.signal }));
    await settle();
    expect(outcome).toEqual([]);

    const registry = coordinator.registry;
    await registry.attach(create(AgentHelloSchema, { agentId: "a-1", name: "lab-1", hostname: "h", protocolVersion: 2, heartbeatIntervalMs: 60_000 }), { terminate: () => undefined });
    await registry.replaceInventory("a-1", ["1", "2"].map((n) => create(DeviceReportSchema, { serial: `S-${n}`, state: "device", properties: { physicalId: `pd-${n}`, identityStatus: "ok" } })));
    await settle();
    expect(outcome).toEqual(["pd-1"]);

    await coordinator.leases.setLabels("S-2", { rack: "b2" });
    await settle();
    expect(outcome).toEqual(["pd-1", "pd-2"]);
    ac.abort();
  });
});

describe("a clean restart", () => {
  it("keeps the lease queue: a waiting caller's place survives a SIGTERM-style close", async () => {
    const restartDir = await mkdtemp(join(tmpdir(), "farm-restart-"));
    const opts = { listen: { host: "127.0.0.1", port: 0 }, dataDir: join(restartDir, "data"), dashboardDir: null, log: createLogger({ level: "error" }) };
    const first = await startCoordinator(opts);
    const secret = (await first.tokens.create("ci", "user", "operator")).secret;
    const auth: Interceptor = (next) => (req) => (req.header.set("authorization", `Bearer ${secret}`), next(req));
    const client = createClient(LeaseService, createGrpcTransport({ baseUrl: first.url, interceptors: [auth] }));
    // Nothing matches: the call waits in the queue until the coordinator goes away.
    const waiting = client.acquireLease({ selector: { model: "Pixel 99" }, waitMs: 60_000, ttlMs: 60_000, ticket: "restart-ticket" }).then(
      () => "granted",
      (e: unknown) => ConnectError.from(e).rawMessage,
    );
    await expect.poll(() => first.leases.list().queue.map((w) => w.ticket)).toEqual(["restart-ticket"]);
    await first.close();
    expect(await waiting).not.toBe("granted");
    const second = await startCoordinator(opts);
    try {
      expect(second.leases.list().queue.map((w) => w.ticket)).toEqual(["restart-ticket"]);
    } finally {
      await second.close();
      await rm(restartDir, { recursive: true, force: true });
    }
  });
});
