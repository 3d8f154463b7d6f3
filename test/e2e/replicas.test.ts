/**
 * Coordinator replicas on one PostgreSQL database: three `farm coordinator`
 * processes sharing it (and a data dir, as a shared mount would), two agents
 * attached to different replicas, CLIs pointed at each replica.
 */
import { copyFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "@farm/coordinator/db/testing/test-postgres";
import { adbConnect, SimDevice, startAdbServer, type AdbServer } from "../devsim/index.js";
import { farm, startFarm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AsyncQueue } from "@farm/shared/async-queue";
import { LinkRequestSchema, ReplicaService, type LinkRequest } from "@farm/shared/gen/farm/v1/replica_service_pb";
import { bearer } from "../support/fake-agent.js";

interface Listed {
  serial: string;
  state: string;
  agentName: string;
  properties: { physicalId: string };
}

let database: { url: string; drop(): Promise<void> };
let dir: TempDir;
const replicas: FarmProcess[] = [];
const agents: FarmProcess[] = [];
const adbs: AdbServer[] = [];
const phones: SimDevice[] = [];
/** Admin CLI environment per replica. */
const envs: NodeJS.ProcessEnv[] = [];
const serials: string[] = [];

const urlOf = (i: number) => String(replicas[i]?.ready["url"]);
const listed = async (env: NodeJS.ProcessEnv) => ((await farm(["devices"], env)).json["devices"] ?? []) as Listed[];

beforeAll(async () => {
  database = await createTestDatabase();
  dir = await makeTempDir("replicas");
  const data = join(dir.path, "coordinator");
  for (let i = 0; i < 3; i++) replicas.push(await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", data, "--database", database.url]));
  // The first start wrote the admin token; the others found tokens in the database.
  const admin = (await readFile(join(data, "admin.token"), "utf8")).trim();
  for (let i = 0; i < 3; i++) envs.push({ FARM_COORDINATOR: urlOf(i), FARM_TOKEN: admin, FARM_HOME: join(dir.path, `home-${i}`), FARM_CONFIG: join(dir.path, "none.json") });
  // Two lab hosts: each its own adb server and phone, its agent attached to a different replica.
  for (const [n, replica] of [[0, 0], [1, 1]] as const) {
    const adb = await startAdbServer();
    adbs.push(adb);
    const phone = new SimDevice();
    phones.push(phone);
    serials.push(await adbConnect(adb.port, "127.0.0.1", await phone.listen()));
    const token = await farm(["token", "create", "--kind", "agent", "--name", `lab-${n}`], envs[replica]);
    const tokenFile = join(dir.path, `agent-${n}.token`);
    await writeFile(tokenFile, String(token.json["token"]), { mode: 0o600 });
    agents.push(
      await startFarm([
        "agent",
        "--coordinator",
        urlOf(replica),
        "--name",
        `lab-${n}`,
        "--data-dir",
        join(dir.path, `agent-${n}`),
        "--token-file",
        tokenFile,
        "--adb-port",
        String(adb.port),
        "--no-adb-start",
        "--lock-dir",
        join(dir.path, `locks-${n}`),
        "--heartbeat-interval",
        "500",
      ]),
    );
  }
  // Every replica lists both phones online, whichever replica their agent attached to.
  for (const env of envs) {
    await waitFor("both phones listed online", async () => {
      const list = await listed(env);
      return serials.every((s) => list.some((d) => d.serial === s && d.state === "device" && d.properties.physicalId)) ? true : undefined;
    });
  }
}, 120_000);

afterAll(async () => {
  for (const a of agents) await a.stop();
  for (const r of replicas) await r.stop();
  for (const p of phones) await p.close();
  for (const a of adbs) await a.stop();
  await dir?.remove();
  await database?.drop();
});

describe("coordinator replicas on PostgreSQL", () => {
  it("routes a leased shell through whichever replica the CLI reaches to the replica holding the agent", async () => {
    // Phone 1's agent is on replica 1; the CLI talks to replica 2, then replica 0.
    const lease = await farm(["lease", "acquire", "--device", serials[1] as string, "--ttl", "5m"], envs[2]);
    expect(lease.code).toBe(0);
    const token = String((lease.json["lease"] as { token: string }).token);
    for (const i of [2, 0, 1]) {
      const r = await farm(["shell", "--device", serials[1] as string, "--", "echo", `via-${i}`], { ...envs[i], FARM_LEASE: token });
      expect(r.json, `through replica ${i}`).toMatchObject({ ok: true });
      expect(JSON.stringify(r.json)).toContain(`via-${i}`);
    }
    // The lease taken on replica 2 holds on the others too.
    const other = await farm(["shell", "--device", serials[1] as string, "--", "echo", "x"], envs[0]);
    expect(other.json).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER" });
    expect((await farm(["lease", "release"], { ...envs[1], FARM_LEASE: token })).code).toBe(0);
  });

  it("refuses another replica's credential to anyone who is not a replica, and a user token on the replica API", async () => {
    const res = await fetch(`${urlOf(0)}/farm.v1.ReplicaService/CallAgent`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${String(envs[0]?.["FARM_TOKEN"])}` },
      body: JSON.stringify({ agentId: "x" }),
    });
    expect(res.status).toBe(403);
    const forged = await fetch(`${urlOf(0)}/farm.v1.ReplicaService/CallAgent`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer farmr_00000000-0000-4000-8000-000000000000.${"A".repeat(43)}` },
      body: JSON.stringify({ agentId: "x" }),
    });
    expect(forged.status).toBe(401);
    // The link stream too (authenticated once, at its opening): a user token, and a forged replica credential.
    const openLink = async (token: string) => {
      const out = new AsyncQueue<LinkRequest>();
      out.push(create(LinkRequestSchema, { id: 1n, kind: { case: "call", value: { agentId: "x", call: { method: "/farm.v1.DeviceService/GetOwnership" } } } }));
      const link = createClient(ReplicaService, createGrpcTransport({ baseUrl: urlOf(0), interceptors: [bearer(token)] })).link(out);
      try {
        for await (const _ of link) return "answered";
        return "ended";
      } catch (err) {
        return Code[ConnectError.from(err).code];
      } finally {
        out.close();
      }
    };
    expect(await openLink(String(envs[0]?.["FARM_TOKEN"]))).toBe("PermissionDenied");
    expect(await openLink(`farmr_00000000-0000-4000-8000-000000000000.${"A".repeat(43)}`)).toBe("Unauthenticated");
  });

  it("refuses a second agent presenting an attached agent's id through another replica, and keeps the first attached", async () => {
    // A copy of lab-0's identity on another host, reaching replica 2 while lab-0 is attached to replica 0.
    const copy = join(dir.path, "agent-0-copy");
    await mkdir(copy, { mode: 0o700 });
    await copyFile(join(dir.path, "agent-0", "agent.json"), join(copy, "agent.json"));
    const firstLog = agents[0]?.stderr().length ?? 0;
    const second = await startFarm([
      "agent",
      "--coordinator",
      urlOf(2),
      "--name",
      "lab-0",
      "--data-dir",
      copy,
      "--token-file",
      join(dir.path, "agent-0.token"),
      "--adb-port",
      String(adbs[0]?.port),
      "--no-adb-start",
      "--lock-dir",
      join(dir.path, "locks-0-copy"),
      "--heartbeat-interval",
      "500",
    ]);
    try {
      // Refused each time it tries (it retries with backoff), never let in to push the first one out.
      await waitFor("the second agent to be refused twice", () => ((second.stderr().match(/AGENT_ALREADY_ATTACHED/g) ?? []).length >= 2 ? true : undefined), { timeoutMs: 20_000 });
      expect(agents[0]?.stderr().slice(firstLog)).not.toMatch(/AGENT_ALREADY_ATTACHED|another coordinator replica/);
      // The first still holds its stream: calls through every replica reach it.
      const lease = await farm(["lease", "acquire", "--device", serials[0] as string], envs[1]);
      expect(lease.code, lease.stderr).toBe(0);
      const token = String((lease.json["lease"] as { token: string }).token);
      for (const [i, env] of envs.entries()) {
        const r = await farm(["shell", "--device", serials[0] as string, "--", "echo", `still-${i}`], { ...env, FARM_LEASE: token });
        expect(r.json, `through replica ${i}: ${r.stdout}`).toMatchObject({ ok: true });
      }
      expect((await farm(["lease", "release"], { ...envs[1], FARM_LEASE: token })).code).toBe(0);
    } finally {
      await second.stop();
    }
  });

  it("ends a revoked user's lease, session and wait taken through other replicas", async () => {
    // Phone 0's agent is on replica 0; carol leases it, starts a session and waits again through replica 1.
    const carolToken = await farm(["token", "create", "--kind", "user", "--name", "carol"], envs[0]);
    const carol = { ...envs[1], FARM_TOKEN: String(carolToken.json["token"]) };
    const serial = serials[0] as string;
    const acquired = await farm(["lease", "acquire", "--device", serial, "--ttl", "5m"], carol);
    expect(acquired.code, acquired.stdout + acquired.stderr).toBe(0);
    const lease = acquired.json["lease"] as { token: string; leaseId: string };
    const started = await farm(["session", "start", "--device", serial], { ...carol, FARM_LEASE: lease.token });
    expect(started.code, started.stdout + started.stderr).toBe(0);
    const sessionId = String((started.json["session"] as { sessionId: string }).sessionId);
    const waiting = farm(["lease", "acquire", "--device", serial, "--wait", "5m"], carol);
    await waitFor("carol's wait queued", async () => (((await farm(["lease", "list"], envs[2])).json["queue"] ?? []) as { holder: string }[]).some((w) => w.holder === "carol") ? true : undefined);

    // Revoked through replica 2, which holds none of it.
    expect((await farm(["token", "revoke", "carol"], envs[2])).code).toBe(0);
    const mine = await farm(["lease", "acquire", "--device", serial], envs[0]);
    expect(mine.code, mine.stdout + mine.stderr).toBe(0);
    expect(((await farm(["session", "show", sessionId], envs[0])).json["session"] as { status: string }).status).toBe("lease-ended");
    expect((await waiting).code).not.toBe(0);
    const activity = ((await farm(["activity", "--device", serial], envs[1])).json["entries"] ?? []) as { command: string; caller: string; leaseId: string }[];
    expect(activity).toContainEqual(expect.objectContaining({ command: "revokeToken", caller: "admin", leaseId: lease.leaseId }));
    expect((await farm(["lease", "renew", "--lease", lease.token], envs[1])).json).toMatchObject({ ok: false, code: "LEASE_RELEASED" });
    expect((await farm(["lease", "release"], { ...envs[0], FARM_LEASE: (mine.json["lease"] as { token: string }).token })).code).toBe(0);
  });

  it("ends a session when its lease is released through another replica, and a lease with none just ends", async () => {
    const serial = serials[1] as string;
    const acquired = await farm(["lease", "acquire", "--device", serial, "--ttl", "5m"], envs[1]);
    expect(acquired.code, acquired.stdout + acquired.stderr).toBe(0);
    const token = (acquired.json["lease"] as { token: string }).token;
    const started = await farm(["session", "start", "--device", serial], { ...envs[1], FARM_LEASE: token });
    expect(started.code, started.stdout + started.stderr).toBe(0);
    const sessionId = String((started.json["session"] as { sessionId: string }).sessionId);
    // Released through replica 2: its release statement sees the running session, and that replica ends it (after answering).
    expect((await farm(["lease", "release"], { ...envs[2], FARM_LEASE: token })).code).toBe(0);
    const status = async () => ((await farm(["session", "show", sessionId], envs[0])).json["session"] as { status: string }).status;
    await waitFor("the session ended with its lease", async () => ((await status()) === "lease-ended" ? true : undefined));
    const again = await farm(["lease", "acquire", "--device", serial], envs[0]);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect((await farm(["lease", "release"], { ...envs[2], FARM_LEASE: (again.json["lease"] as { token: string }).token })).code).toBe(0);
  });

  it("refuses a token revoked through one replica on the others in the next call, though they took it as live just before", async () => {
    const created = await farm(["token", "create", "--kind", "user", "--name", "dave"], envs[0]);
    const dave = (i: number) => ({ ...envs[i], FARM_TOKEN: String(created.json["token"]) });
    // Replicas 1 and 2 authenticate dave (and remember the token as live for a while).
    for (const i of [1, 2]) expect((await farm(["lease", "list"], dave(i))).code).toBe(0);
    expect((await farm(["token", "revoke", "dave"], envs[0])).code).toBe(0);
    for (const i of [1, 2]) expect((await farm(["lease", "list"], dave(i))).json).toMatchObject({ ok: false, code: "UNAUTHENTICATED" });
  });

  it("ends an agent's stream on its replica when its token is revoked through another replica", async () => {
    // lab-1's agent is attached to replica 1; the admin revokes its token through replica 0.
    expect((await farm(["token", "revoke", "lab-1"], envs[0])).code).toBe(0);
    for (const env of envs) {
      await waitFor("lab-1 offline everywhere", async () => {
        const agents = ((await farm(["agents"], env)).json["agents"] ?? []) as { name: string; online: boolean }[];
        return agents.some((a) => a.name === "lab-1" && !a.online) ? true : undefined;
      }, { timeoutMs: 10_000 });
    }
    const list = await listed(envs[2] as NodeJS.ProcessEnv);
    expect(list.find((d) => d.serial === serials[1])?.state).not.toBe("device");
  });
});
