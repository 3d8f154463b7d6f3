/**
 * Running it for real: TLS between agent, CLI and coordinator (with a
 * certificate reload under an attached agent), the cleartext-token rule,
 * draining agents, and the Prometheus series after a scripted scenario.
 * Coordinator and agents are separate processes; phones are simulated.
 */
import { request } from "node:http";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { adbConnect, SimDevice, startAdbServer, type AdbServer } from "../devsim/index.js";
import { attachFakeAgent, bearer, fakeDevices } from "../support/fake-agent.js";
import { farm, farmProcess, startFarm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

let dir: TempDir;
let adb: AdbServer;
const phones: SimDevice[] = [];
const procs: FarmProcess[] = [];

async function phone(serialno: string): Promise<string> {
  const p = new SimDevice({ serialno });
  phones.push(p);
  return adbConnect(adb.port, "127.0.0.1", await p.listen());
}

async function service(args: string[], env: NodeJS.ProcessEnv = {}): Promise<FarmProcess> {
  const p = await startFarm(args, env);
  procs.push(p);
  return p;
}

async function tokenFile(env: NodeJS.ProcessEnv, kind: "agent" | "user", name: string): Promise<string> {
  const r = await farm(["token", "create", "--kind", kind, "--name", name], env);
  const path = join(dir.path, `${name}.token`);
  await writeFile(path, String(r.json["token"]), { mode: 0o600 });
  return path;
}

function agentArgs(url: string, name: string, token: string, extra: string[] = []): string[] {
  return [
    "agent",
    "--coordinator",
    url,
    "--name",
    name,
    "--data-dir",
    join(dir.path, `agent-${name}`),
    "--token-file",
    token,
    "--adb-port",
    String(adb.port),
    "--no-adb-start",
    "--lock-dir",
    join(dir.path, "locks"),
    "--heartbeat-interval",
    "500",
    ...extra,
  ];
}

const agentsOf = async (env: NodeJS.ProcessEnv) => ((await farm(["agents"], env)).json["agents"] ?? []) as { name: string; online: boolean; draining: boolean; transport: string }[];

beforeAll(async () => {
  dir = await makeTempDir("operations");
  adb = await startAdbServer();
});

afterAll(async () => {
  for (const p of procs) await p.stop();
  for (const p of phones) await p.close();
  await adb?.stop();
  await dir?.remove();
});

describe("TLS", () => {
  it("serves agents and CLIs over TLS verified with a lab CA, refuses a wrong CA, and reloads the certificate under an attached agent", async () => {
    const tls = join(dir.path, "tls");
    const made = await farm(["tls", "self-signed", "--host", "localhost", "--host", "127.0.0.1", "--out-dir", tls]);
    expect(made.code).toBe(0);
    expect((await farm(["tls", "self-signed", "--host", "localhost", "--out-dir", tls])).json).toMatchObject({ ok: false, code: "ALREADY_EXISTS" });
    const other = join(dir.path, "other-ca");
    expect((await farm(["tls", "self-signed", "--host", "localhost", "--host", "127.0.0.1", "--out-dir", other])).code).toBe(0);

    const data = join(dir.path, "coord-tls");
    // The certificate files the coordinator reads; replaced below for the reload.
    await writeFile(join(dir.path, "live.pem"), await readFile(join(tls, "server.pem")));
    await writeFile(join(dir.path, "live.key"), await readFile(join(tls, "server.key")), { mode: 0o600 });
    const coord = await service(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", data, "--tls-cert", join(dir.path, "live.pem"), "--tls-key", join(dir.path, "live.key")]);
    const url = String(coord.ready["url"]);
    expect(url).toMatch(/^https:\/\//);
    const admin = (await readFile(join(data, "admin.token"), "utf8")).trim();
    const env = { FARM_COORDINATOR: url, FARM_TOKEN: admin, FARM_CA_FILE: join(tls, "ca.pem"), FARM_HOME: join(dir.path, "home"), FARM_CONFIG: join(dir.path, "none.json") };

    // No CA, or the wrong one: refused with a code that says why.
    const untrusted = await farm(["agents"], { ...env, FARM_CA_FILE: "" });
    expect(untrusted.json).toMatchObject({ ok: false, code: "TLS_VERIFY_FAILED", field: "ca-file" });
    expect((await farm(["agents", "--ca-file", join(other, "ca.pem")], env)).json).toMatchObject({ ok: false, code: "TLS_VERIFY_FAILED" });

    const agentToken = await tokenFile(env, "agent", "tls-lab");
    const serial = await phone("TLS0001");
    await service(agentArgs(url, "tls-lab", agentToken, ["--ca-file", join(tls, "ca.pem")]));
    await waitFor("the phone over TLS", async () => (((await farm(["devices"], env)).json["devices"] as { serial: string; state: string }[]) ?? []).some((d) => d.serial === serial && d.state === "device") ? true : undefined);
    expect((await agentsOf(env)).find((a) => a.name === "tls-lab")).toMatchObject({ online: true, transport: "tls" });

    // An agent that trusts another CA never attaches.
    const wrongToken = await tokenFile(env, "agent", "wrong-ca");
    const wrong = await service(agentArgs(url, "wrong-ca", wrongToken, ["--ca-file", join(other, "ca.pem")]));
    await waitFor("the refused handshake in the wrong agent's log", () => (/certificate|verify/i.test(wrong.stderr()) ? true : undefined));
    expect((await agentsOf(env)).some((a) => a.name === "wrong-ca")).toBe(false);

    // Reload: a certificate from the other CA; new clients see it, the attached agent stays.
    await writeFile(join(dir.path, "live.pem"), await readFile(join(other, "server.pem")));
    await writeFile(join(dir.path, "live.key"), await readFile(join(other, "server.key")));
    coord.kill("SIGHUP");
    await waitFor("the new certificate", async () => ((await farm(["agents", "--ca-file", join(other, "ca.pem")], env)).code === 0 ? true : undefined));
    expect((await farm(["agents"], env)).json).toMatchObject({ code: "TLS_VERIFY_FAILED" });
    const agents = ((await farm(["agents", "--ca-file", join(other, "ca.pem")], env)).json["agents"] ?? []) as { name: string; online: boolean }[];
    expect(agents.find((a) => a.name === "tls-lab")?.online).toBe(true);
    expect(coord.stderr()).toContain("TLS certificate reloaded");
    // Still the same stream: the agent never detached.
    expect(coord.stderr().match(/"msg":"agent detached"/g)).toBeNull();
  });
});

describe("tokens over cleartext", () => {
  let url: string;
  let port: number;
  let env: NodeJS.ProcessEnv;
  let admin: string;

  beforeAll(async () => {
    const data = join(dir.path, "coord-plain");
    const coord = await service(["coordinator", "--listen", "0.0.0.0:0", "--data-dir", data]);
    port = Number(new URL(String(coord.ready["url"])).port);
    url = `http://127.0.0.1:${port}`;
    admin = (await readFile(join(data, "admin.token"), "utf8")).trim();
    env = { FARM_COORDINATOR: url, FARM_TOKEN: admin, FARM_HOME: join(dir.path, "home"), FARM_CONFIG: join(dir.path, "none.json") };
  });

  /** A Connect call whose connection comes from 127.0.0.2: "another machine". */
  function fromRemote(token: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: "127.0.0.1", port, localAddress: "127.0.0.2", method: "POST", path: "/farm.v1.RegistryService/ListAgents", headers: { "content-type": "application/json", authorization: `Bearer ${token}` } },
        (res) => {
          let body = "";
          res.setEncoding("utf8").on("data", (c: string) => (body += c)).on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.once("error", reject);
      req.end("{}");
    });
  }

  it("are never sent by the CLI or an agent to a non-loopback address without --insecure", async () => {
    const remote = { ...env, FARM_COORDINATOR: `http://127.0.0.2:${port}` };
    const r = await farm(["agents"], remote);
    expect(r.json).toMatchObject({ ok: false, code: "INSECURE_TRANSPORT", field: "coordinator" });
    const agentToken = await tokenFile(env, "agent", "plain-lab");
    const refused = await farmProcess(agentArgs(`http://127.0.0.2:${port}`, "plain-lab", agentToken));
    expect(refused.code).toBe(77);
    expect(refused.json).toMatchObject({ code: "INSECURE_TRANSPORT" });
  });

  it("are refused by the coordinator from another machine, also with the client's --insecure", async () => {
    const r = await fromRemote(admin);
    expect(r.status).toBe(403);
    expect(r.body).toMatch(/cleartext/);
    // Loopback is fine, and health needs no token anywhere.
    expect((await farm(["agents"], env)).code).toBe(0);
    const client = createClient(RegistryService, createGrpcTransport({ baseUrl: url, interceptors: [bearer(admin)] }));
    expect((await client.listAgents({})).agents).toEqual([]);
  });

  it("are accepted with the coordinator's --insecure, and the agent shows as cleartext", async () => {
    const data = join(dir.path, "coord-insecure");
    const coord = await service(["coordinator", "--listen", "0.0.0.0:0", "--data-dir", data, "--insecure"]);
    expect(coord.stderr()).toMatch(/"level":"warn".*--insecure/);
    port = Number(new URL(String(coord.ready["url"])).port);
    admin = (await readFile(join(data, "admin.token"), "utf8")).trim();
    const insecureEnv = { ...env, FARM_COORDINATOR: `http://127.0.0.1:${port}`, FARM_TOKEN: admin };
    expect((await fromRemote(admin)).status).toBe(200);
    // A (lightweight) agent whose connection comes from 127.0.0.2.
    const agentToken = String((await farm(["token", "create", "--kind", "agent", "--name", "remote-lab"], insecureEnv)).json["token"]);
    const stop = new AbortController();
    await attachFakeAgent({ url: `http://127.0.0.1:${port}`, token: agentToken, index: 7, devices: fakeDevices(7, 1), heartbeatMs: 1_000, signal: stop.signal, localAddress: "127.0.0.2" });
    const agent = await waitFor("the remote agent", async () => (await agentsOf(insecureEnv)).find((a) => a.online) ?? undefined);
    expect(agent.transport).toBe("cleartext");
    const pretty = await farm(["agents", "--output", "pretty"], insecureEnv);
    expect(pretty.stdout).toContain("CLEARTEXT (insecure)");
    await waitFor("the warning in the coordinator's log", () => (/agent attached over cleartext/.test(coord.stderr()) ? true : undefined));
    stop.abort();
  });
});

describe("draining and metrics", () => {
  let url: string;
  let env: NodeJS.ProcessEnv;
  let userEnv: NodeJS.ProcessEnv;
  let args: string[];
  let agent: FarmProcess;
  let a: string;
  let b: string;

  /** One series' value from a Prometheus text page (labels exactly as written). */
  const series = (text: string, name: string): number | undefined => {
    const line = text.split("\n").find((l) => l.startsWith(`${name} `));
    return line === undefined ? undefined : Number(line.slice(name.length + 1));
  };
  const scrape = async (u: string) => (await fetch(u)).text();

  beforeAll(async () => {
    const data = join(dir.path, "coord-drain");
    const coord = await service(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", data]);
    url = String(coord.ready["url"]);
    env = { FARM_COORDINATOR: url, FARM_TOKEN: (await readFile(join(data, "admin.token"), "utf8")).trim(), FARM_HOME: join(dir.path, "home"), FARM_CONFIG: join(dir.path, "none.json") };
    userEnv = { ...env, FARM_TOKEN: String((await farm(["token", "create", "--kind", "user", "--name", "ci-job"], env)).json["token"]) };
    a = await phone("DRAIN0001");
    b = await phone("DRAIN0002");
    args = agentArgs(url, "drain-lab", await tokenFile(env, "agent", "drain-lab"), ["--metrics-listen", "127.0.0.1:0", "--drain-timeout", "300"]);
    agent = await service(args);
    await waitFor("both phones", async () => {
      const list = ((await farm(["devices", "--state", "device"], env)).json["devices"] ?? []) as { serial: string }[];
      return [a, b].every((s) => list.some((d) => d.serial === s)) ? true : undefined;
    });
  });

  it("exposes the listed series with the values of a scripted scenario", async () => {
    const lease = await farm(["lease", "acquire", "--device", a], userEnv);
    const token = (lease.json["lease"] as { token: string }).token;
    expect((await farm(["shell", "--device", a, "--lease", token, "--", "echo", "hi"], userEnv)).code).toBe(0);
    expect((await farm(["shell", "--device", a, "--", "echo", "no lease"], userEnv)).json).toMatchObject({ code: "LEASE_HELD_BY_OTHER" });
    expect((await farm(["evidence", "capture", "--device", b], userEnv)).code).toBe(0);
    const text = await scrape(`${url}/metrics`);
    expect(series(text, "farm_agents{state=\"online\"}")).toBe(1);
    expect(series(text, "farm_agents{state=\"draining\"}")).toBe(0);
    const devices = ((await farm(["devices", "--state", "device"], env)).json["devices"] as unknown[]).length;
    expect(devices).toBeGreaterThanOrEqual(2);
    expect(series(text, "farm_devices{state=\"device\"}")).toBe(devices);
    expect(series(text, "farm_leases_active")).toBe(1);
    expect(series(text, "farm_lease_queue_length")).toBe(0);
    expect(series(text, "farm_routed_actions_total{command=\"runShell\",outcome=\"ok\"}")).toBe(1);
    expect(series(text, "farm_routed_actions_total{command=\"runShell\",outcome=\"LEASE_HELD_BY_OTHER\"}")).toBe(1);
    expect(series(text, "farm_routed_actions_total{command=\"captureEvidence\",outcome=\"ok\"}")).toBe(1);
    expect(series(text, "farm_evidence_bundles_total{kind=\"still\",status=\"complete\"}")).toBe(1);
    const listed = (await farm(["evidence", "list"], env)).json["bundles"] as { totalBytes: number }[];
    expect(series(text, "farm_evidence_bytes_total")).toBe(listed[0]?.totalBytes);
    const agentText = await scrape(String(agent.ready["metricsUrl"]));
    expect(series(agentText, "farm_agent_devices{state=\"device\"}")).toBe(devices);
    expect(series(agentText, "farm_agent_commands_total{command=\"runShell\",outcome=\"ok\"}")).toBe(1);
    expect(series(agentText, "farm_agent_draining")).toBe(0);
    expect(series(agentText, "farm_agent_video_workers")).toBe(0);
    expect((await farm(["lease", "release", "--lease", token], userEnv)).code).toBe(0);
  });

  it("drains on SIGTERM: no new leases or work, the running command completes, the agent exits", async () => {
    const lease = await farm(["lease", "acquire", "--device", a], userEnv);
    const token = (lease.json["lease"] as { token: string }).token;
    // Runs until the test lets it finish (a property on the phone), however long the checks
    // below take on a loaded machine: the drain must wait for it.
    const running = farm(["shell", "--device", a, "--lease", token, "--", "while [ \"$(getprop farm.test.go)\" != 1 ]; do sleep 0.05; done; echo finished"], userEnv);
    await waitFor("the command running (its device lock held)", async () => {
      const s = await farm(["device", "ownership", "status", "--device", a], userEnv);
      return (s.json["ownership"] as { locked: boolean } | undefined)?.locked ? true : undefined;
    });
    agent.kill("SIGTERM");
    await waitFor("the agent draining", async () => ((await agentsOf(env)).find((x) => x.name === "drain-lab")?.draining ? true : undefined));
    expect(series(await scrape(`${url}/metrics`), "farm_agents{state=\"draining\"}")).toBe(1);
    expect(series(await scrape(String(agent.ready["metricsUrl"])), "farm_agent_draining")).toBe(1);
    const refused = await farm(["lease", "acquire", "--device", b, "--wait", "0s"], userEnv);
    expect(refused.json).toMatchObject({ ok: false, code: "NO_DEVICE_AVAILABLE" });
    expect((await farm(["device", "props", "--device", b], userEnv)).json).toMatchObject({ ok: false, code: "AGENT_DRAINING" });
    expect(agent.proc.exitCode).toBeNull(); // still draining: the command has not finished
    phones.find((p) => p.getProp("ro.serialno") === "DRAIN0001")!.setProp("farm.test.go", "1");
    const done = await running;
    expect(done.code).toBe(0);
    expect(done.stdout).toContain("finished");
    expect(await agent.exited).toBe(0);
    expect(agent.stderr()).toMatch(/"msg":"drained: no command running"/);
  });

  it("drains remotely with farm agent drain NAME (admin only)", async () => {
    agent = await service(args);
    await waitFor("the agent back, not draining", async () => {
      const x = (await agentsOf(env)).find((y) => y.name === "drain-lab");
      return x?.online && !x.draining ? true : undefined;
    });
    expect((await farm(["agent", "drain", "drain-lab"], userEnv)).json).toMatchObject({ ok: false, code: "PERMISSION_DENIED" });
    const r = await farm(["agent", "drain", "drain-lab", "--reason", "kernel upgrade"], env);
    expect(r.code).toBe(0);
    expect(r.json["agent"]).toMatchObject({ name: "drain-lab", draining: true, drainReason: "kernel upgrade" });
    expect(await agent.exited).toBe(0);
    expect(agent.stderr()).toContain("kernel upgrade");
  });
});
