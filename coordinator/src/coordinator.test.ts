import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { AsyncQueue } from "@farm/shared/async-queue";
import { toErrorReport } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { PROTOCOL_VERSION } from "@farm/shared/version";
import { AgentService, AttachRequestSchema, type AttachRequest } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { DeviceSchema } from "@farm/shared/gen/farm/v1/registry_pb";
import { ListTokensResponseSchema, TokenKind, TokenService } from "@farm/shared/gen/farm/v1/token_service_pb";
import { Health, HealthCheckResponse_ServingStatus } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { startCoordinator, type RunningCoordinator } from "./coordinator.js";

let dir: string;
let coordinator: RunningCoordinator;
let admin: string;
let agentToken: string;

const bearer = (token: string | undefined): Interceptor => (next) => (req) => {
  if (token !== undefined) req.header.set("authorization", `Bearer ${token}`);
  return next(req);
};

function grpc(token?: string) {
  return createGrpcTransport({ baseUrl: coordinator.url, interceptors: [bearer(token)] });
}

function hello(agentId: string, protocolVersion = PROTOCOL_VERSION): AttachRequest {
  return create(AttachRequestSchema, {
    kind: {
      case: "hello",
      value: { agentId, name: `agent-${agentId}`, hostname: "h", protocolVersion, agentVersion: "t", heartbeatIntervalMs: 1000 },
    },
  });
}

/** Opens an attach stream and returns the first response (or the error). */
async function attach(agentId: string, token: string, version = PROTOCOL_VERSION) {
  const out = new AsyncQueue<AttachRequest>();
  out.push(hello(agentId, version));
  const client = createClient(AgentService, grpc(token));
  const it = client.attach(out)[Symbol.asyncIterator]();
  try {
    const first = await it.next();
    return { ok: true as const, first, out, it };
  } catch (err) {
    out.close();
    return { ok: false as const, error: toErrorReport(err) };
  }
}

async function waitForValue<T>(probe: () => Promise<T | undefined>, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((res) => setTimeout(res, 20));
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-coord-"));
  coordinator = await startCoordinator({
    listen: { host: "127.0.0.1", port: 0 },
    dataDir: join(dir, "data"),
    log: createLogger({ level: "error" }),
  });
  admin = (await coordinator.tokens.create("root", "user", "admin")).secret;
  agentToken = (await coordinator.tokens.create("lab", "agent")).secret;
});

afterAll(async () => {
  await coordinator.close();
  await rm(dir, { recursive: true, force: true });
});

describe("coordinator", () => {
  it("keeps its data dir private and its database in WAL mode", async () => {
    expect((await stat(join(dir, "data"))).mode & 0o777).toBe(0o700);
    await stat(join(dir, "data", "coordinator.db-wal"));
  });

  it("answers health checks without a token, over gRPC and /healthz", async () => {
    const health = createClient(Health, grpc());
    expect((await health.check({ service: "" })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    expect((await health.check({ service: "farm.v1.RegistryService" })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    await expect(health.check({ service: "nope.Service" })).rejects.toMatchObject({ code: Code.NotFound });
    const res = await fetch(`${coordinator.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "ok" });
  });

  it("serves the Connect protocol over HTTP/1.1 on the same port", async () => {
    const client = createClient(RegistryService, createConnectTransport({ baseUrl: coordinator.url, httpVersion: "1.1", interceptors: [bearer(admin)] }));
    expect((await client.listDevices({})).devices).toEqual([]);
  });

  it("refuses calls without a token, with an unknown token, a revoked token, or the wrong kind", async () => {
    const call = (token?: string) => createClient(RegistryService, grpc(token)).listAgents({}).then(() => null, toErrorReport);
    expect(await call()).toMatchObject({ code: "UNAUTHENTICATED", message: "missing bearer token" });
    expect(await call("farmu_nope")).toMatchObject({ code: "UNAUTHENTICATED", message: "unknown token" });
    expect(await call(agentToken)).toMatchObject({ code: "PERMISSION_DENIED" });

    const { secret } = await coordinator.tokens.create("temp", "user");
    expect(await call(secret)).toBeNull();
    await createClient(TokenService, grpc(admin)).revokeToken({ name: "temp" });
    expect(await call(secret)).toMatchObject({ code: "UNAUTHENTICATED", message: "token has been revoked" });

    // A user token cannot attach as an agent.
    const r = await attach("user-as-agent", admin);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error.code).toBe("PERMISSION_DENIED");
  });

  it("lets only admin user tokens manage tokens, and never lists secrets", async () => {
    const plain = (await coordinator.tokens.create("plain", "user")).secret;
    const denied = await createClient(TokenService, grpc(plain)).listTokens({}).then(() => null, toErrorReport);
    expect(denied).toMatchObject({ code: "PERMISSION_DENIED" });
    const tokens = createClient(TokenService, grpc(admin));
    const created = await tokens.createToken({ name: "ci", kind: TokenKind.USER });
    expect(created.token).toMatch(/^farmu_/);
    const listed = await tokens.listTokens({});
    expect(toJsonString(ListTokensResponseSchema, listed)).not.toContain(created.token);
    const dup = await tokens.createToken({ name: "ci", kind: TokenKind.USER }).then(() => null, toErrorReport);
    expect(dup).toMatchObject({ code: "ALREADY_EXISTS", field: "name" });
    const bad = await tokens.createToken({ name: "x", kind: TokenKind.UNSPECIFIED }).then(() => null, toErrorReport);
    expect(bad).toMatchObject({ code: "INVALID_ARGUMENT", field: "kind" });
  });

  it("refuses an agent whose protocol version it cannot serve, naming both versions", async () => {
    const r = await attach("future-agent", agentToken, PROTOCOL_VERSION + 41);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.code).toBe("AGENT_VERSION_INCOMPATIBLE");
    expect(r.error.message).toContain(`protocol version ${PROTOCOL_VERSION + 41}`);
    expect(r.error.message).toContain(`${PROTOCOL_VERSION}..${PROTOCOL_VERSION}`);
  });

  it("refuses a second agent with an id that is attached, and keeps the first", async () => {
    const first = await attach("same-id", agentToken);
    expect(first.ok && first.first.value?.kind.case).toBe("helloAccepted");
    const second = await attach("same-id", agentToken);
    expect(second.ok).toBe(false);
    expect(!second.ok && second.error.code).toBe("AGENT_ALREADY_ATTACHED");
    const agents = await createClient(RegistryService, grpc(admin)).listAgents({});
    expect(agents.agents.find((a) => a.id === "same-id")?.online).toBe(true);
    if (first.ok) first.out.close();
  });

  it("lists an attached agent's devices identically over binary gRPC and Connect JSON", async () => {
    // An agent token is one agent: this agent has its own.
    const r = await attach("inventory-agent", (await coordinator.tokens.create("inventory", "agent")).secret);
    if (!r.ok) throw new Error(r.error.message);
    r.out.push(
      create(AttachRequestSchema, {
        kind: {
          case: "inventory",
          value: {
            devices: [
              { serial: "s2", state: "offline" },
              { serial: "s1", state: "device", properties: { model: "Pixel 7", apiLevel: 34, serialno: "SN1", bootId: "b", physicalId: "pd-s1", identityStatus: "ok" } },
            ],
          },
        },
      }),
    );
    const grpcClient = createClient(RegistryService, grpc(admin));
    const devices = await waitForValue(async () => {
      const d = (await grpcClient.listDevices({ agent: "inventory-agent" })).devices;
      return d.length === 2 ? d : undefined;
    });
    expect(devices.map((d) => [d.serial, d.state, d.properties?.model ?? ""])).toEqual([
      ["s1", "device", "Pixel 7"],
      ["s2", "offline", ""],
    ]);
    const json = createClient(RegistryService, createConnectTransport({ baseUrl: coordinator.url, httpVersion: "1.1", interceptors: [bearer(admin)] }));
    const viaJson = (await json.listDevices({ agent: "inventory-agent" })).devices;
    expect(viaJson.map((d) => toJsonString(DeviceSchema, d))).toEqual(devices.map((d) => toJsonString(DeviceSchema, d)));
    expect((await grpcClient.listDevices({ agent: "inventory-agent", state: "offline" })).devices.map((d) => d.serial)).toEqual(["s2"]);

    // The agent's stream ends: its devices stay listed, as agent-offline.
    r.out.close();
    const after = await waitForValue(async () => {
      const d = (await grpcClient.listDevices({ agent: "inventory-agent" })).devices;
      return d.every((x) => x.state === "agent-offline") ? d : undefined;
    });
    expect(after.map((d) => d.serial)).toEqual(["s1", "s2"]);
  });

  it("rejects a stream that does not start with hello", async () => {
    const out = new AsyncQueue<AttachRequest>();
    out.push(create(AttachRequestSchema, { kind: { case: "heartbeat", value: { sequence: 1n } } }));
    const it = createClient(AgentService, grpc(agentToken)).attach(out)[Symbol.asyncIterator]();
    const err = await it.next().then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect(toErrorReport(err).code).toBe("AGENT_PROTOCOL_VIOLATION");
  });
});
