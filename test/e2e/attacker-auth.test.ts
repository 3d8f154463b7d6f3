/**
 * Trust boundaries, played as an attacker would with real processes: a
 * coordinator and an agent (`farm coordinator`, `farm agent`), a private adb
 * server and a simulated phone. A stolen agent token, revoked credentials
 * that try to keep their open streams, an agent token on the dashboard, and
 * one user reaching for a phone another user leased.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AsyncQueue } from "@farm/shared/async-queue";
import { toErrorReport, type ErrorReport } from "@farm/shared/errors";
import { PROTOCOL_VERSION } from "@farm/shared/version";
import { AgentService, AttachRequestSchema, type AttachRequest, type AttachResponse } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { TokenKind, TokenRole, TokenService } from "@farm/shared/gen/farm/v1/token_service_pb";
import { WatchService, type WatchResponse } from "@farm/shared/gen/farm/v1/watch_service_pb";
import { adbConnect, runAdb, SimDevice, startAdbServer } from "../devsim/index.js";
import { bearer } from "../support/fake-agent.js";
import { farm, startFarm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

/** The requirement: revocation ends what the token opened within 1 s. */
const REVOKE_MS = 1_000;

let lab: SplitFarm;
let phone: SimDevice;
let serial: string;
/** The lab agent's token ("lab-1"), as a thief on the lab host would read it. */
let stolen: string;
let adminToken: string;
const cleanups: (() => Promise<unknown> | void)[] = [];

const grpc = (token: string): Transport => createGrpcTransport({ baseUrl: lab.url, interceptors: [bearer(token)] });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function token(kind: "agent" | "user", name: string): Promise<string> {
  const r = await farm(["token", "create", "--kind", kind, "--name", name], lab.env);
  expect(r.code, r.stdout).toBe(0);
  return String(r.json["token"]);
}

const userEnv = (t: string) => ({ ...lab.env, FARM_TOKEN: t });

/** Opens an agent control stream with a hello for `agentId`; the first answer, or the refusal. */
async function attach(agentToken: string, agentId: string): Promise<{ ok: true; it: AsyncIterator<AttachResponse>; out: AsyncQueue<AttachRequest>; abort: AbortController } | { ok: false; error: ErrorReport }> {
  const out = new AsyncQueue<AttachRequest>();
  out.push(
    create(AttachRequestSchema, {
      kind: { case: "hello", value: { agentId, name: `fake-${agentId}`, hostname: "attacker", protocolVersion: PROTOCOL_VERSION, agentVersion: "t", heartbeatIntervalMs: 500 } },
    }),
  );
  const abort = new AbortController();
  const it = createClient(AgentService, grpc(agentToken)).attach(out, { signal: abort.signal })[Symbol.asyncIterator]();
  try {
    const first = await it.next();
    if (first.done || first.value.kind.case !== "helloAccepted") throw new Error(`unexpected first answer ${JSON.stringify(first.value?.kind.case)}`);
    return { ok: true, it, out, abort };
  } catch (err) {
    out.close();
    abort.abort();
    return { ok: false, error: toErrorReport(err) };
  }
}

/** When (and how) a server stream ends: read until done or error. */
async function endOf<T>(it: AsyncIterator<T>, onMessage: (m: T) => void = () => {}): Promise<{ at: number; error: ErrorReport | undefined }> {
  try {
    for (;;) {
      const r = await it.next();
      if (r.done) return { at: Date.now(), error: undefined };
      onMessage(r.value);
    }
  } catch (err) {
    return { at: Date.now(), error: toErrorReport(err) };
  }
}

interface AgentRow {
  id: string;
  name: string;
  online: boolean;
  offlineReason?: string;
}
const agents = async () => ((await farm(["agents"], lab.env)).json["agents"] ?? []) as AgentRow[];

function logLines(p: FarmProcess): Record<string, unknown>[] {
  return p
    .stderr()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        return {};
      }
    });
}

beforeAll(async () => {
  lab = await startSplitFarm("attacker-auth", { agentName: "lab-1" });
  stolen = (await readFile(join(lab.dir.path, "agent.token"), "utf8")).trim();
  adminToken = String(lab.env["FARM_TOKEN"]);
  phone = new SimDevice({ serialno: "ATTACK01" });
  serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
  await waitFor("the phone in farm devices", async () => {
    const list = ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string; properties: { physicalId: string } }[];
    return list.some((d) => d.serial === serial && d.state === "device" && d.properties.physicalId) ? true : undefined;
  });
});

afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  await phone?.close();
  await lab?.stop();
});

describe("an agent token is one agent", () => {
  it("refuses a stolen agent token attaching as another agent, online or offline, and logs the token's name", async () => {
    const realId = String(lab.agent.ready["agentId"]);
    // A second host: its token binds to its agent id at its first attach; then it goes offline.
    const second = await token("agent", "lab-2");
    const two = await attach(second, "agent-two");
    expect(two.ok).toBe(true);
    if (two.ok) {
      two.out.close();
      two.abort.abort();
    }
    await waitFor("agent-two offline", async () => ((await agents()).find((a) => a.id === "agent-two")?.online === false ? true : undefined));

    // The stolen token as an offline agent, as an unknown new agent; another token as the online agent.
    const asOffline = await attach(stolen, "agent-two");
    const asNew = await attach(stolen, "evil-agent");
    const asOnline = await attach(second, realId);
    for (const r of [asOffline, asNew, asOnline]) {
      if (r.ok) r.abort.abort();
      expect(r.ok ? "accepted" : r.error).toMatchObject({ code: "AGENT_IDENTITY_MISMATCH" });
    }
    // A fresh token cannot take an agent another live token is bound to either.
    const fresh = await token("agent", "lab-3");
    const takeover = await attach(fresh, realId);
    if (takeover.ok) takeover.abort.abort();
    expect(takeover.ok ? "accepted" : takeover.error).toMatchObject({ code: "AGENT_IDENTITY_MISMATCH" });

    const list = await agents();
    expect(list.find((a) => a.id === realId)).toMatchObject({ name: "lab-1", online: true });
    expect(list.find((a) => a.id === "evil-agent")).toBeUndefined();
    expect(list.find((a) => a.id === "agent-two")).toMatchObject({ name: "fake-agent-two", online: false });
    // Logged at warn with the token's name (names are not secrets); never the secret.
    const refusals = logLines(lab.coordinator).filter((l) => l["level"] === "warn" && l["code"] === "AGENT_IDENTITY_MISMATCH");
    expect(refusals.map((l) => l["principal"])).toEqual(expect.arrayContaining(["lab-1", "lab-2", "lab-3"]));
    expect(refusals.find((l) => l["principal"] === "lab-1" && l["agentId"] === "evil-agent")).toBeDefined();
    expect(lab.coordinator.stderr()).not.toContain(stolen);
    expect(lab.coordinator.stderr()).not.toContain(second);
    // The token list shows which agent each token is bound to.
    const tokens = (await farm(["token", "list"], lab.env)).json["tokens"] as { name: string; agentId: string }[];
    expect(tokens.find((t) => t.name === "lab-1")?.agentId).toBe(realId);
    expect(tokens.find((t) => t.name === "lab-2")?.agentId).toBe("agent-two");
  });

  it("gives an agent token nothing from the dashboard's HTTP endpoints", async () => {
    const user = await token("user", "evidence-reader");
    const captured = await farm(["evidence", "capture", "--device", serial], userEnv(user));
    expect(captured.code, captured.stdout).toBe(0);
    const id = String(captured.json["evidenceId"]);
    const file = `${lab.url}/dashboard/files/evidence/${id}/manifest.json`;
    // The user token reads it; the agent token gets nothing, not even "not found".
    expect((await fetch(file, { headers: { authorization: `Bearer ${user}` } })).status).toBe(200);
    const byAgent = await fetch(file, { headers: { authorization: `Bearer ${stolen}` } });
    expect(byAgent.status).toBe(403);
    expect(await byAgent.text()).not.toContain(serial);
    const me = await fetch(`${lab.url}/dashboard/api/me`, { headers: { authorization: `Bearer ${stolen}` } });
    expect(me.status).toBe(403);
    const missing = await fetch(`${lab.url}/dashboard/files/evidence/00000000-0000-4000-8000-000000000000/manifest.json`, { headers: { authorization: `Bearer ${stolen}` } });
    expect(missing.status).toBe(403);
    const signIn = await fetch(`${lab.url}/dashboard/api/sign-in`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ token: stolen }) });
    expect(signIn.status).toBe(401);
  });
});

describe("roles", () => {
  it("creates viewer, operator and admin tokens from the CLI, and each can do what its role allows", async () => {
    const create = (args: string[]) => farm(["token", "create", ...args], lab.env);
    const viewer = await create(["--kind", "user", "--name", "vera", "--role", "viewer"]);
    expect(viewer.json).toMatchObject({ ok: true, info: { role: "TOKEN_ROLE_VIEWER", admin: false } });
    const legacyAdmin = await create(["--kind", "user", "--name", "ada", "--admin"]);
    expect(legacyAdmin.json).toMatchObject({ ok: true, info: { role: "TOKEN_ROLE_ADMIN", admin: true } });
    const plain = await create(["--kind", "user", "--name", "otto"]);
    expect(plain.json).toMatchObject({ ok: true, info: { role: "TOKEN_ROLE_OPERATOR" } });
    expect((await create(["--kind", "agent", "--name", "x-agent", "--role", "admin"])).json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "role" });
    expect((await create(["--kind", "user", "--name", "x-user", "--role", "root"])).json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "role" });
    expect((await create(["--kind", "user", "--name", "x-both", "--role", "viewer", "--admin"])).json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "role" });

    const vera = userEnv(String(viewer.json["token"]));
    expect((await farm(["devices"], vera)).code).toBe(0);
    expect((await farm(["lease", "list"], vera)).code).toBe(0);
    const lease = await farm(["lease", "acquire", "--device", serial], vera);
    expect(lease.json).toMatchObject({ ok: false, code: "PERMISSION_DENIED" });
    expect(String(lease.json["message"])).toContain("operator");
    expect((await farm(["shell", "--device", serial, "--", "echo", "hi"], vera)).json).toMatchObject({ ok: false, code: "PERMISSION_DENIED" });
    const otto = userEnv(String(plain.json["token"]));
    expect((await farm(["token", "list"], otto)).json).toMatchObject({ ok: false, code: "PERMISSION_DENIED" });
    expect((await farm(["agent", "drain", "lab-1"], otto)).json).toMatchObject({ ok: false, code: "PERMISSION_DENIED" });
    const ada = userEnv(String(legacyAdmin.json["token"]));
    const listed = (await farm(["token", "list"], ada)).json["tokens"] as { name: string; role: string }[];
    expect(listed.find((t) => t.name === "vera")?.role).toBe("TOKEN_ROLE_VIEWER");
  });
});

describe("revocation bites", () => {
  it("ends a user's Watch stream, dashboard session and an agent's attach session within 1 s of revoking their tokens", async () => {
    const watcherToken = await token("user", "watcher");
    const agentToken = await token("agent", "lab-revoke");
    // A real second agent process, attached with the token about to be revoked
    // (its own adb server: the lab's phone stays on one agent only).
    const adb = await startAdbServer();
    cleanups.push(() => adb.stop());
    const agent = await startFarm([
      "agent",
      "--coordinator",
      lab.url,
      "--name",
      "lab-revoke",
      "--data-dir",
      join(lab.dir.path, "agent-revoke"),
      "--token-file",
      await writeToken("revoke.token", agentToken),
      "--adb-port",
      String(adb.port),
      "--no-adb-start",
      "--lock-dir",
      join(lab.dir.path, "locks-revoke"),
      "--heartbeat-interval",
      "500",
    ]);
    cleanups.push(() => agent.stop());
    const revokeId = String(agent.ready["agentId"]);
    await waitFor("lab-revoke online", async () => ((await agents()).find((a) => a.id === revokeId)?.online ? true : undefined));

    // An admin's Watch stream sees the moment the agent goes offline.
    const observerAbort = new AbortController();
    cleanups.push(() => observerAbort.abort());
    const observer = createClient(WatchService, grpc(adminToken)).watch({}, { signal: observerAbort.signal })[Symbol.asyncIterator]();
    expect((await observer.next()).value?.kind.case).toBe("ready");
    let offlineAt: number | undefined;
    let offlineReason: string | undefined;
    void endOf(observer, (m: WatchResponse) => {
      if (m.kind.case === "agent" && m.kind.value.id === revokeId && !m.kind.value.online && offlineAt === undefined) {
        offlineAt = Date.now();
        offlineReason = m.kind.value.offlineReason;
      }
    });

    // The user's Watch stream and a dashboard sign-in with the same token.
    const watchAbort = new AbortController();
    cleanups.push(() => watchAbort.abort());
    const watch = createClient(WatchService, grpc(watcherToken)).watch({}, { signal: watchAbort.signal })[Symbol.asyncIterator]();
    expect((await watch.next()).value?.kind.case).toBe("ready");
    const watchEnd = endOf(watch);
    const signIn = await fetch(`${lab.url}/dashboard/api/sign-in`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ token: watcherToken }) });
    expect(signIn.status).toBe(200);
    const cookie = String(signIn.headers.get("set-cookie")).split(";")[0] as string;
    expect((await fetch(`${lab.url}/dashboard/api/me`, { headers: { cookie } })).status).toBe(200);

    const tokens = createClient(TokenService, grpc(adminToken));
    const t0 = Date.now();
    await Promise.all([tokens.revokeToken({ name: "watcher" }), tokens.revokeToken({ name: "lab-revoke" })]);
    const ended = await Promise.race([watchEnd, sleep(3_000).then(() => undefined)]);
    await waitFor("the agent shown offline", () => offlineAt, { timeoutMs: 3_000, intervalMs: 20 }).catch(() => undefined);
    const watchMs = ended ? ended.at - t0 : Infinity;
    const agentMs = offlineAt !== undefined ? offlineAt - t0 : Infinity;
    console.log(`revocation: Watch stream ended after ${watchMs} ms, agent offline after ${agentMs} ms`);
    expect(watchMs).toBeLessThan(REVOKE_MS);
    expect(ended?.error).toMatchObject({ code: "UNAUTHENTICATED" });
    expect(agentMs).toBeLessThan(REVOKE_MS);
    expect(offlineReason).toBe("token revoked");
    expect((await agents()).find((a) => a.id === revokeId)).toMatchObject({ online: false, offlineReason: "token revoked" });
    // The dashboard session is gone, and the revoked agent cannot come back.
    expect((await fetch(`${lab.url}/dashboard/api/me`, { headers: { cookie } })).status).toBe(401);
    await sleep(1_500);
    expect((await agents()).find((a) => a.id === revokeId)?.online).toBe(false);
    // The lab's own agent was never touched.
    expect((await agents()).find((a) => a.name === "lab-1")?.online).toBe(true);
  });
});

describe("a leased phone is the holder's", () => {
  let alice: string;
  let bob: string;
  let lease: string;

  beforeAll(async () => {
    alice = await token("user", "alice");
    bob = await token("user", "bob");
    const r = await farm(["lease", "acquire", "--device", serial, "--ttl", "5m"], userEnv(alice));
    expect(r.code, r.stdout).toBe(0);
    lease = String((r.json["lease"] as { token: string }).token);
  });

  afterAll(async () => {
    await farm(["lease", "release", "--lease", lease], userEnv(alice));
  });

  it("lets only the holder or an admin change its labels", async () => {
    const byBob = await farm(["device", "label", "set", serial, "rack=evil"], userEnv(bob));
    expect(byBob.json).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER" });
    expect(await farm(["device", "label", "set", serial, "rack=a1"], userEnv(alice))).toMatchObject({ code: 0 });
    const rmByBob = await farm(["device", "label", "rm", serial, "rack"], userEnv(bob));
    expect(rmByBob.json).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER" });
    const byAdmin = await farm(["device", "label", "set", serial, "owner=ops"], lab.env);
    expect(byAdmin.json).toMatchObject({ ok: true, labels: { rack: "a1", owner: "ops" } });
  });

  it("lets only the holder or an admin create or remove app forwards", async () => {
    // A forward on the agent's host for the leased phone, as an app endpoint would leave it.
    const created = await runAdb(lab.adb.port, ["-s", serial, "forward", "tcp:0", "localabstract:farm-sdk-attack"]);
    const port = Number(created.stdout.trim());
    expect(port).toBeGreaterThan(0);
    const listed = async () => (await runAdb(lab.adb.port, ["forward", "--list"])).stdout.includes(`tcp:${port}`);
    expect(await listed()).toBe(true);
    const removeByBob = await farm(["app", "remove-forward", "--device", serial, "--port", String(port)], userEnv(bob));
    expect(removeByBob.json).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER" });
    expect(await listed()).toBe(true);
    const endpointByBob = await farm(["app", "endpoint", "--device", serial, "--package", "com.example.farmdemo"], userEnv(bob));
    expect(endpointByBob.json).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER" });
    const removeByAlice = await farm(["app", "remove-forward", "--device", serial, "--port", String(port)], userEnv(alice));
    expect(removeByAlice.code, removeByAlice.stdout).toBe(0);
    expect(await listed()).toBe(false);
  });

  it("lets only the holder or an admin stop a recording of it", async () => {
    const ticker = setInterval(() => phone.state.screen.changed(), 50);
    try {
      const started = await farm(["evidence", "video", "start", "--device", serial, "--duration-seconds", "30", "--size", "216x480"], userEnv(alice));
      expect(started.code, started.stdout).toBe(0);
      const id = String(started.json["sessionId"]);
      const byBob = await farm(["evidence", "video", "stop", "--session", id], userEnv(bob));
      expect(byBob.json).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER" });
      const status = await farm(["evidence", "video", "status", "--session", id], userEnv(bob));
      expect(status.json).toMatchObject({ ok: true, status: "recording" });
      await sleep(1_000);
      const byAlice = await farm(["evidence", "video", "stop", "--session", id], userEnv(alice));
      expect(byAlice.json).toMatchObject({ ok: true, status: "complete" });
    } finally {
      clearInterval(ticker);
    }
  });
});

describe("an audit sees every token", () => {
  it("lists tokens past one page: farm token list follows next_page_token, and the server refuses a forged token", async () => {
    const admin = createClient(TokenService, grpc(adminToken));
    // More than the largest page (1000), so a list cut at one page would hide some.
    const names = Array.from({ length: 1010 }, (_, i) => `bulk-${String(i).padStart(4, "0")}`);
    for (let i = 0; i < names.length; i += 100) {
      await Promise.all(names.slice(i, i + 100).map((name) => admin.createToken({ kind: TokenKind.USER, name, role: TokenRole.VIEWER })));
    }
    const r = await farm(["token", "list"], lab.env);
    expect(r.code, r.stdout.slice(0, 500)).toBe(0);
    const listed = (r.json["tokens"] as { name: string }[]).map((t) => t.name);
    expect(new Set(listed).size).toBe(listed.length);
    const have = new Set(listed);
    expect(names.filter((n) => !have.has(n))).toEqual([]);
    expect(listed).toEqual([...listed].sort());

    // The pages behind it: at most 1000, then the rest, then an empty token.
    const first = await admin.listTokens({ pageSize: 5000 });
    expect(first.tokens).toHaveLength(1000);
    const second = await admin.listTokens({ pageToken: first.nextPageToken });
    expect(second.nextPageToken).toBe("");
    expect([...first.tokens, ...second.tokens].map((t) => t.name)).toEqual(listed);
    expect(await admin.listTokens({ pageToken: "forged" }).then(() => null, toErrorReport)).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(await admin.listTokens({ pageSize: -1 }).then(() => null, toErrorReport)).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_size" });
  });
});

async function writeToken(name: string, secret: string): Promise<string> {
  const file = join(lab.dir.path, name);
  await writeFile(file, secret, { mode: 0o600 });
  return file;
}
