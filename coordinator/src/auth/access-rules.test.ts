/**
 * The role matrix: every method of every service the coordinator serves,
 * found from the generated service descriptors (so a new method or service
 * appears here by itself), called by each kind of caller against a real
 * coordinator. A method without an access rule fails; every other outcome
 * must be what the access table says.
 */
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Errors } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { Health } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { Access, rulesOf } from "@farm/shared/method-rules";
import { accessRules, methodKey, type AccessRule } from "./access-rules.js";
import { authInterceptor } from "./auth.js";
import { startCoordinator, type RunningCoordinator } from "../coordinator.js";
import type { Role } from "./token-store.js";

type Caller = "none" | "agent" | Role;
const callers: Caller[] = ["none", "agent", "viewer", "operator", "admin"];
type Outcome = "allowed" | "unauthenticated" | "denied";

/** Every service in the generated farm.v1 code, plus the standard health service. */
async function generatedServices(): Promise<DescService[]> {
  const dir = fileURLToPath(new URL("../../../shared/src/gen/farm/v1/", import.meta.url));
  const services: DescService[] = [Health];
  for (const file of (await readdir(dir)).filter((f) => f.endsWith("_pb.ts")).sort()) {
    const mod = (await import(`@farm/shared/gen/farm/v1/${file.replace(/\.ts$/, "")}`)) as Record<string, unknown>;
    for (const v of Object.values(mod)) if (isService(v)) services.push(v);
  }
  return services;
}

/** Served by agents and called by the coordinator only: the coordinator itself must not serve them. */
function agentServed(s: DescService): boolean {
  return s.methods.every((m) => rulesOf(m).access === Access.COORDINATOR);
}

function isService(v: unknown): v is DescService {
  return typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "service";
}

/** What the table says a caller gets. */
function expected(rule: AccessRule, caller: Caller): Outcome {
  if (rule.kind === "none") return "allowed";
  if (caller === "none") return "unauthenticated";
  if (rule.kind === "agent") return caller === "agent" ? "allowed" : "denied";
  // No token of any caller here is a replica's credential.
  if (rule.kind === "replica") return "denied";
  if (caller === "agent") return "denied";
  const order: Role[] = ["viewer", "operator", "admin"];
  return order.indexOf(caller) >= order.indexOf(rule.role) ? "allowed" : "denied";
}

/** Calls one method with an empty request; any answer but the two auth refusals got past auth. */
async function call(transport: Transport, service: DescService, method: DescMethod): Promise<Outcome> {
  const client = createClient(service, transport) as unknown as Record<string, (input: unknown, opts: object) => unknown>;
  const fn = client[method.localName] as (input: unknown, opts: object) => unknown;
  const abort = new AbortController();
  const opts = { signal: abort.signal, timeoutMs: 3_000 };
  const empty = create(method.input);
  const noInput = (async function* () {})();
  try {
    switch (method.methodKind) {
      case "unary":
        await (fn(empty, opts) as Promise<unknown>);
        break;
      case "client_streaming":
        await (fn(noInput, opts) as Promise<unknown>);
        break;
      case "server_streaming":
      case "bidi_streaming": {
        const it = (fn(method.methodKind === "server_streaming" ? empty : noInput, opts) as AsyncIterable<unknown>)[Symbol.asyncIterator]();
        await it.next();
        break;
      }
    }
    return "allowed";
  } catch (err) {
    const ce = ConnectError.from(err);
    if (ce.code === Code.Unauthenticated) return "unauthenticated";
    if (ce.code === Code.PermissionDenied) return "denied";
    return "allowed";
  } finally {
    abort.abort();
  }
}

/** Whether a request names a phone: a farm.v1.DeviceTarget anywhere in it. */
function namesPhone(message: DescMessage, seen = new Set<string>()): boolean {
  if (message.typeName === "farm.v1.DeviceTarget") return true;
  if (seen.has(message.typeName)) return false;
  seen.add(message.typeName);
  return message.fields.some((f) => f.message !== undefined && namesPhone(f.message, seen));
}

/** Reads of a phone (its screen, tree, log, properties, journal receipts, evidence, video) and what hangs off its lease. */
const phoneReads = [
  "farm.v1.DeviceService/TakeScreenshot",
  "farm.v1.DeviceService/GetUiTree",
  "farm.v1.DeviceService/ReadLogcat",
  "farm.v1.DeviceService/ListPackages",
  "farm.v1.DeviceService/GetProperties",
  "farm.v1.DeviceService/GetActionReceipt",
  "farm.v1.DeviceService/ReconcileOwnership",
  "farm.v1.DeviceService/AbandonAction",
  "farm.v1.DeviceService/GetAppEndpoint",
  "farm.v1.DeviceService/RemoveAppForward",
  "farm.v1.DeviceService/PullFile",
  "farm.v1.EvidenceService/CaptureEvidence",
  "farm.v1.VideoService/StartVideo",
  "farm.v1.LiveScreenService/WatchScreen",
  "farm.v1.LogcatService/WatchLogcat",
];

/**
 * Methods that name a phone and are neither lease_holder_only nor
 * device_change (which needs the lease token itself), with why a caller
 * other than the holder may use them on a leased phone. Methods that name
 * a session, tunnel or bundle instead of a phone are ruled where they act
 * (StopVideo: its starter, the holder or an admin; stored bundles and
 * session records are shared reads).
 */
const openOnLeasedPhones: Record<string, string> = {
  "farm.v1.DeviceService/GetOwnership": "the lock and journal status, not the phone's content; command text in it is shown only to its requester and admins (command-privacy.ts), and whoever waits for a phone must see why it is blocked",
  "farm.v1.DeviceService/PinIdentity": "admin only",
  "farm.v1.SessionService/StartSession": "needs the lease token itself (session-service.ts authorizes the lease)",
  "farm.v1.ShellService/OpenShell": "needs the lease token itself (shell-service.ts routes it as a change)",
  "farm.v1.ReplicaService/RelayScreen": "another replica only (access replica), which checked its caller holds the lease or is an admin; the replica holding the agent checks that lease id again in the database (replicas/relayed-route.ts)",
  "farm.v1.ReplicaService/RelayLogcat": "another replica only (access replica), which checked its caller holds the lease or is an admin; the replica holding the agent checks that lease id again in the database (replicas/relayed-route.ts)",
  "farm.v1.ShellService/WatchShell": "needs the lease token itself (shell-service.ts routes it as a change, as OpenShell)",
};

const bearer = (token: string | undefined): Interceptor => (next) => (req) => {
  if (token !== undefined) req.header.set("authorization", `Bearer ${token}`);
  return next(req);
};

let agentOnly: DescService[] = [];
let dir: string;
let coordinator: RunningCoordinator;
let services: DescService[];
const transports = new Map<Caller, Transport>();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-access-"));
  coordinator = await startCoordinator({ listen: { host: "127.0.0.1", port: 0 }, dataDir: join(dir, "data"), dashboardDir: null, log: createLogger({ level: "error" }) });
  const tokens: Record<Caller, string | undefined> = {
    none: undefined,
    agent: (await coordinator.tokens.create("matrix-agent", "agent")).secret,
    viewer: (await coordinator.tokens.create("matrix-viewer", "user", "viewer")).secret,
    operator: (await coordinator.tokens.create("matrix-operator", "user", "operator")).secret,
    admin: (await coordinator.tokens.create("matrix-admin", "user", "admin")).secret,
  };
  for (const c of callers) transports.set(c, createGrpcTransport({ baseUrl: coordinator.url, interceptors: [bearer(tokens[c])] }));
  const all = await generatedServices();
  services = all.filter((s) => !agentServed(s));
  agentOnly = all.filter(agentServed);
});

afterAll(async () => {
  await coordinator?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("access rules", () => {
  it("has exactly one rule per method the coordinator serves, and none for methods that do not exist", () => {
    const methods = services.flatMap((s) => s.methods.map((m) => methodKey(s, m)));
    expect(methods.length).toBeGreaterThan(50);
    const missing = methods.filter((m) => accessRules[m] === undefined);
    expect(missing, `methods without an access rule in coordinator/src/access-rules.ts: ${missing.join(", ")}`).toEqual([]);
    const stale = Object.keys(accessRules).filter((k) => !methods.includes(k));
    expect(stale, "rules for methods that do not exist").toEqual([]);
  });

  it("keeps the sensitive methods where the roles say they are", () => {
    const role = (m: string) => {
      const r = accessRules[m];
      return r?.kind === "user" ? r.role : r?.kind;
    };
    for (const m of ["CreateToken", "ListTokens", "RevokeToken"]) expect(role(`farm.v1.TokenService/${m}`)).toBe("admin");
    for (const m of ["RegistryService/DrainAgent", "DeviceService/PinIdentity", "VideoService/ReleaseVideo"]) expect(role(`farm.v1.${m}`)).toBe("admin");
    // AbandonAction: any action for an admin; for the lease holder only a raw-adb action (device-service.ts, and the agent checks the kind).
    for (const m of [
      "DeviceService/AbandonAction",
      "DeviceService/RunShell",
      "LeaseService/AcquireLease",
      "EvidenceService/CaptureEvidence",
      "VideoService/StartVideo",
      "BlobService/UploadBlob",
      "ShellService/OpenShell",
      "SessionService/StartSession",
      "SessionService/EndSession",
    ]) expect(role(`farm.v1.${m}`)).toBe("operator");
    for (const m of ["RegistryService/ListDevices", "ActivityService/ListActivity", "EvidenceService/PullEvidence", "WatchService/Watch", "SessionService/GetSession", "SessionService/ListSessions"]) {
      expect(role(`farm.v1.${m}`)).toBe("viewer");
    }
    for (const m of ["AgentService/Attach", "AgentEvidenceService/UploadEvidence", "AgentBlobService/PutBlob", "AgentShellService/ServeShell"]) expect(role(`farm.v1.${m}`)).toBe("agent");
    expect(role("grpc.health.v1.Health/Check")).toBe("none");
  });

  it("keeps every read of a phone for its lease holder: a method that names a phone is holder-only, needs the lease itself, or says here why not", () => {
    const names = services.flatMap((s) => s.methods.filter((m) => namesPhone(m.input)).map((m) => ({ key: methodKey(s, m), rules: rulesOf(m) })));
    expect(names.length).toBeGreaterThan(20);
    const open = names.filter((m) => !m.rules.leaseHolderOnly && !m.rules.deviceChange).map((m) => m.key);
    const unexplained = open.filter((k) => openOnLeasedPhones[k] === undefined);
    expect(unexplained, "methods that reach a leased phone for anyone: mark them lease_holder_only, or say why not in openOnLeasedPhones").toEqual([]);
    expect(Object.keys(openOnLeasedPhones).filter((k) => !open.includes(k)), "openOnLeasedPhones entries that are not open methods naming a phone").toEqual([]);
    for (const read of phoneReads) expect(names.find((m) => m.key === read)?.rules.leaseHolderOnly, `${read} is a read of a phone`).toBe(true);
    for (const { key, rules } of names.filter((m) => m.rules.leaseHolderOnly)) {
      // The refusal names what was refused, in the method's words.
      expect(rules.leaseHolderAction, `${key}: lease_holder_action`).toMatch(/^[a-z][a-zA-Z ]+ (it|its [a-zA-Z ]+)$/);
    }
  });

  it("declares lease_holder_only only where a call names its phone (routeFor enforces it from the target)", () => {
    const holderOnly = services.flatMap((s) => s.methods.filter((m) => rulesOf(m).leaseHolderOnly).map((m) => ({ key: methodKey(s, m), names: namesPhone(m.input) })));
    expect(holderOnly.filter((m) => !m.names).map((m) => m.key)).toEqual([]);
  });

  it("does not serve the agents' own services (AgentControlService) to anyone", async () => {
    expect(agentOnly.map((s) => s.typeName)).toContain("farm.v1.AgentControlService");
    for (const s of agentOnly) {
      for (const m of s.methods) {
        expect(accessRules[methodKey(s, m)]).toBeUndefined();
        for (const caller of callers) {
          const client = createClient(s, transports.get(caller) as Transport) as unknown as Record<string, (input: unknown, opts: object) => Promise<unknown>>;
          const err = await (client[m.localName] as (input: unknown, opts: object) => Promise<unknown>)(create(m.input), { timeoutMs: 3_000 }).then(() => null, (e: unknown) => ConnectError.from(e));
          expect([Code.Unimplemented, Code.PermissionDenied, Code.Unauthenticated], `${methodKey(s, m)} as ${caller}`).toContain(err?.code);
        }
      }
    }
  });

  it("refuses a method the table does not know", async () => {
    const intercept = authInterceptor(coordinator.tokens, {});
    const req = { service: { typeName: "farm.v1.NewService" }, method: { name: "Shiny" } } as unknown as Parameters<ReturnType<typeof intercept>>[0];
    const err = await intercept(() => Promise.reject(new Error("must not run")))(req).then(() => null, (e: unknown) => ConnectError.from(e));
    expect(err?.code).toBe(Code.PermissionDenied);
    expect(err?.rawMessage).toContain("no access rule for farm.v1.NewService/Shiny");
  });

  it("lets each caller (no token, agent, viewer, operator, admin) call exactly what the table allows", async () => {
    const mismatches: string[] = [];
    let calls = 0;
    for (const service of services) {
      for (const method of service.methods) {
        const key = methodKey(service, method);
        const rule = accessRules[key];
        if (!rule) {
          mismatches.push(`${key}: no access rule`);
          continue;
        }
        for (const caller of callers) {
          const got = await call(transports.get(caller) as Transport, service, method);
          calls++;
          const want = expected(rule, caller);
          if (got !== want) mismatches.push(`${key} as ${caller}: got ${got}, want ${want}`);
        }
      }
    }
    expect(mismatches).toEqual([]);
    expect(calls).toBeGreaterThan(250);
  });

  it("names the needed role when it refuses", async () => {
    const viewer = transports.get("viewer") as Transport;
    const { DeviceService } = await import("@farm/shared/gen/farm/v1/device_service_pb");
    const err = await createClient(DeviceService, viewer).runShell({}).then(() => null, (e: unknown) => ConnectError.from(e));
    expect(err?.code).toBe(Code.PermissionDenied);
    expect(err?.rawMessage).toContain("needs the operator role");
    expect(Errors.PERMISSION_DENIED.code).toBe("PERMISSION_DENIED");
  });
});
