/**
 * What an agent may claim, played by an attacker with real processes: a
 * coordinator, the lab's agent, an attacker's agent with its own token and
 * adb server, a second lab agent on the lab's adb server, a hand-driven
 * agent that answers commands with lies, and the CLI. The coordinator runs
 * with a 2 GiB evidence quota: what one recording reserves (its largest
 * bundle), so a user recording holds all that is left of it.
 */
import { createHash, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdir, readFile, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, fromBinary, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AsyncQueue } from "@farm/shared/async-queue";
import { toErrorReport, type ErrorReport } from "@farm/shared/errors";
import { PROTOCOL_VERSION } from "@farm/shared/version";
import { AgentEvidenceService, UploadEvidenceRequestSchema, type UploadEvidenceRequest } from "@farm/shared/gen/farm/v1/agent_evidence_service_pb";
import { AgentService, AttachRequestSchema, type AgentCall, type AgentCallResultSchema, type AttachRequest } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { EvidenceFileHeaderSchema } from "@farm/shared/gen/farm/v1/evidence_pb";
import { StartVideoRequestSchema, VideoService, VideoSessionSchema } from "@farm/shared/gen/farm/v1/video_service_pb";
import { methodPath } from "@farm/shared/method-rules";
import { adbConnect, SimDevice, startAdbServer, type AdbServer } from "../devsim/index.js";
import { bearer } from "../support/fake-agent.js";
import { farm, startFarm, waitFor, type CliResult, type FarmProcess } from "../support/farm-process.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

interface ListedDevice {
  serial: string;
  state: string;
  agentName: string;
  quarantineReason: string;
  properties: { physicalId: string };
}

let dir: TempDir;
let labAdb: AdbServer;
let attackerAdb: AdbServer;
let coordinator: FarmProcess;
let url: string;
/** The admin's CLI environment. */
let env: NodeJS.ProcessEnv;
const agents: FarmProcess[] = [];
const phones: SimDevice[] = [];
const animations: NodeJS.Timeout[] = [];
const tokens = new Map<string, string>();

const devices = async (): Promise<ListedDevice[]> => ((await farm(["devices"], env)).json["devices"] ?? []) as ListedDevice[];
const userEnv = (name: string): NodeJS.ProcessEnv => ({ ...env, FARM_TOKEN: tokens.get(name) as string });
const sha256 = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

async function token(kind: "agent" | "user", name: string): Promise<string> {
  const r = await farm(["token", "create", "--kind", kind, "--name", name], env);
  if (r.code !== 0) throw new Error(`token ${name}: ${r.stdout}${r.stderr}`);
  const secret = String(r.json["token"]);
  tokens.set(name, secret);
  await writeFile(join(dir.path, `${name}.token`), secret, { mode: 0o600 });
  return secret;
}

async function startAgent(name: string, adb: AdbServer): Promise<FarmProcess> {
  if (!tokens.has(name)) await token("agent", name);
  const p = await startFarm([
    "agent",
    "--coordinator",
    url,
    "--name",
    name,
    "--data-dir",
    join(dir.path, name),
    "--token-file",
    join(dir.path, `${name}.token`),
    "--adb-port",
    String(adb.port),
    "--no-adb-start",
    "--lock-dir",
    join(dir.path, `${name}-locks`),
    "--heartbeat-interval",
    "500",
  ], { FARM_HOME: join(dir.path, "home") });
  agents.push(p);
  return p;
}

/** A simulated phone on an adb server; resolves once `agent` lists it with its identity, in `state`. */
async function phone(adb: AdbServer, serialno: string, agent: string, state = "device"): Promise<{ serial: string; physicalId: string; device: SimDevice }> {
  const device = new SimDevice({ serialno });
  phones.push(device);
  const serial = await adbConnect(adb.port, "127.0.0.1", await device.listen());
  const listed = await waitFor(`${serialno} on ${agent}`, async () => (await devices()).find((d) => d.serial === serial && d.agentName === agent && d.properties.physicalId !== "" && d.state === state), { timeoutMs: 30_000 });
  return { serial, physicalId: listed.properties.physicalId, device };
}

async function leaseOnce(serial: string, more: string[] = []): Promise<CliResult> {
  const r = await farm(["lease", "acquire", "--device", serial, ...more, "--ttl", "1m"], env);
  if (r.code === 0) await farm(["lease", "release", "--lease", String((r.json["lease"] as { token: string }).token)], env);
  return r;
}

const agentId = async (name: string) => String(((await farm(["agents"], env)).json["agents"] as { id: string; name: string }[]).find((a) => a.name === name)?.id);

beforeAll(async () => {
  dir = await makeTempDir("attacker-claims");
  await mkdir(join(dir.path, "pulled"));
  labAdb = await startAdbServer();
  attackerAdb = await startAdbServer();
  coordinator = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", join(dir.path, "coordinator"), "--evidence-quota", "2G"]);
  url = String(coordinator.ready["url"]);
  const admin = (await readFile(String(coordinator.ready["adminTokenFile"]), "utf8")).trim();
  env = { FARM_COORDINATOR: url, FARM_TOKEN: admin, FARM_HOME: join(dir.path, "home"), FARM_CONFIG: join(dir.path, "none.json") };
  for (const user of ["alice", "bob", "carol"]) await token("user", user);
  await startAgent("lab", labAdb);
});

afterAll(async () => {
  for (const t of animations) clearInterval(t);
  // Video workers are detached: stop any this file started that still runs.
  for (const id of await readdir(join(dir.path, "lab", "video", "sessions")).catch(() => [] as string[])) {
    const session = JSON.parse(await readFile(join(dir.path, "lab", "video", "sessions", id, "session.json"), "utf8").catch(() => "{}")) as { worker?: { pid: number } | null };
    const pid = session.worker?.pid;
    if (pid && readFileSafe(`/proc/${pid}/cmdline`).includes("worker-main")) process.kill(pid, "SIGKILL");
  }
  for (const a of agents) await a.stop();
  await coordinator?.stop();
  for (const p of phones) await p.close();
  await labAdb?.stop();
  await attackerAdb?.stop();
  await dir?.remove();
});

function readFileSafe(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

describe("an agent that claims another agent's phone", () => {
  let victim: { serial: string; physicalId: string };
  let clone: { serial: string; physicalId: string };

  beforeAll(async () => {
    victim = await phone(labAdb, "VICTIM0001", "lab");
    await startAgent("attacker", attackerAdb);
    // The attacker presents the victim's hardware identity from a phone of its own.
    clone = await phone(attackerAdb, "VICTIM0001", "attacker", "quarantined");
  });

  it("is quarantined: listed with the reason, never leased, never routed", async () => {
    expect(clone.physicalId).toBe(victim.physicalId);
    const listed = (await devices()).find((d) => d.serial === clone.serial && d.agentName === "attacker");
    expect(listed?.state).toBe("quarantined");
    expect(listed?.quarantineReason).toContain("lab");
    expect((await farm(["devices", "--state", "quarantined"], env)).json["devices"]).toEqual([expect.objectContaining({ serial: clone.serial, agentName: "attacker" })]);

    const bySerial = await leaseOnce(clone.serial, ["--wait", "1s"]);
    expect(bySerial.code).toBe(66);
    const byIdOnAttacker = await farm(["lease", "acquire", "--physical-id", victim.physicalId, "--agent", "attacker", "--wait", "1s", "--ttl", "1m"], env);
    expect(byIdOnAttacker.code).toBe(75);
    const routed = await farm(["device", "props", "--device", clone.serial], env);
    expect(routed.json).toMatchObject({ ok: false, code: "DEVICE_QUARANTINED", field: "device" });
    // The victim's own serial is untouched.
    const own = await leaseOnce(victim.serial, ["--wait", "5s"]);
    expect(own.json["lease"]).toMatchObject({ agentName: "lab", serial: victim.serial });
  });

  it("needs an admin to accept the alias; then the phone is leasable via both agents", async () => {
    const notAdmin = await farm(["device", "alias", "accept", "--device", clone.serial, "--agent", "attacker"], userEnv("alice"));
    expect(notAdmin.json).toMatchObject({ ok: false, code: "PERMISSION_DENIED" });
    const accepted = await farm(["device", "alias", "accept", "--device", clone.serial, "--agent", "attacker"], env);
    expect(accepted.json["device"]).toMatchObject({ serial: clone.serial, agentName: "attacker", state: "device", quarantineReason: "" });
    const viaAttacker = await leaseOnce(clone.serial, ["--wait", "5s"]);
    expect(viaAttacker.json["lease"]).toMatchObject({ agentName: "attacker", serial: clone.serial, physicalId: victim.physicalId });
    const viaLab = await leaseOnce(victim.serial, ["--wait", "5s"]);
    expect(viaLab.json["lease"]).toMatchObject({ agentName: "lab", serial: victim.serial, physicalId: victim.physicalId });
  });

  it("keeps a rejected alias out of leases and routing", async () => {
    const victim2 = await phone(labAdb, "VICTIM0002", "lab");
    const clone2 = await phone(attackerAdb, "VICTIM0002", "attacker", "quarantined");
    const rejected = await farm(["device", "alias", "reject", "--device", clone2.serial, "--agent", "attacker"], env);
    expect(rejected.json["device"]).toMatchObject({ serial: clone2.serial, state: "quarantined" });
    expect(String((rejected.json["device"] as ListedDevice).quarantineReason)).toContain("rejected");
    expect((await leaseOnce(clone2.serial, ["--wait", "1s"])).code).toBe(66);
    expect((await farm(["device", "props", "--device", clone2.serial], env)).json).toMatchObject({ code: "DEVICE_QUARANTINED" });
    expect((await leaseOnce(victim2.serial, ["--wait", "5s"])).json["lease"]).toMatchObject({ agentName: "lab" });
  });
});

describe("a serial on an online and an offline agent", () => {
  it("is not ambiguous while one of them is offline, and the offline one can be removed", async () => {
    const shared = await phone(labAdb, "SHARED0001", "lab");
    const lab2 = await startAgent("lab2", labAdb);
    // With its identity read: an alias is accepted on the phone's physical id too (refused DEVICE_IDENTITY_PENDING before).
    await waitFor("the phone on lab2 with its identity", async () => ((await devices()).some((d) => d.serial === shared.serial && d.agentName === "lab2" && d.properties.physicalId !== "") ? true : undefined), { timeoutMs: 30_000 });
    // One phone legitimately on two hosts: accepted, then both agents are candidates.
    expect((await farm(["device", "alias", "accept", "--device", shared.serial, "--agent", "lab2"], env)).json["device"]).toMatchObject({ state: "device" });
    const both = await farm(["device", "props", "--device", shared.serial], env);
    expect(both.json).toMatchObject({ ok: false, code: "DEVICE_AMBIGUOUS", field: "agent" });
    expect(String(both.json["message"])).toMatch(/lab, lab2/);

    const refused = await farm(["agent", "remove", "lab2"], env);
    expect(refused.json).toMatchObject({ ok: false, code: "AGENT_STILL_ATTACHED", field: "agent" });

    await lab2.stop();
    await waitFor("lab2 offline", async () => ((await farm(["agents"], env)).json["agents"] as { name: string; online: boolean }[]).some((a) => a.name === "lab2" && !a.online) || undefined);
    const routed = await farm(["device", "props", "--device", shared.serial], env);
    expect(routed.json).toMatchObject({ ok: true });

    const removed = await farm(["agent", "remove", "lab2"], env);
    expect(removed.json).toMatchObject({ ok: true, agent: { name: "lab2" } });
    expect(Number(removed.json["removedDevices"])).toBeGreaterThan(0);
    expect((await devices()).filter((d) => d.agentName === "lab2")).toEqual([]);
    expect(((await farm(["agents"], env)).json["agents"] as { name: string }[]).map((a) => a.name)).not.toContain("lab2");
  });
});

/** Uploads a bundle on the agent upload RPC with an agent token, as a compromised host could. */
async function upload(
  agentToken: string,
  start: { evidenceId: string; agentId: string; serial: string; physicalId: string; kind: string },
  files: { path: string; bytes: Buffer }[],
  manifestText: string,
): Promise<ErrorReport | { ok: true }> {
  const client = createClient(AgentEvidenceService, createGrpcTransport({ baseUrl: url, interceptors: [bearer(agentToken)] }));
  const msg = (kind: MessageInitShape<typeof UploadEvidenceRequestSchema>["kind"]) => create(UploadEvidenceRequestSchema, { kind });
  async function* messages(): AsyncGenerator<UploadEvidenceRequest> {
    yield msg({ case: "start", value: { ...start, manifestSha256: sha256(manifestText) } });
    for (const f of files) {
      yield msg({ case: "file", value: create(EvidenceFileHeaderSchema, { path: f.path, size: BigInt(f.bytes.length), sha256: sha256(f.bytes) }) });
      yield msg({ case: "chunk", value: f.bytes });
    }
    yield msg({ case: "manifestJson", value: manifestText });
  }
  try {
    await client.uploadEvidence(messages());
    return { ok: true };
  } catch (err) {
    return toErrorReport(err);
  }
}

/** A pulled bundle's files and manifest, to forge from. */
async function pulled(evidenceId: string, name: string): Promise<{ files: { path: string; bytes: Buffer }[]; manifest: Record<string, unknown> & { artifacts: { path: string | null }[] }; text: string }> {
  const out = join(dir.path, "pulled", name);
  const r = await farm(["evidence", "pull", evidenceId, "--output-dir", out], env);
  if (r.code !== 0) throw new Error(`pull ${evidenceId}: ${r.stdout}`);
  const text = await readFile(join(out, "manifest.json"), "utf8");
  const manifest = JSON.parse(text) as Awaited<ReturnType<typeof pulled>>["manifest"];
  const files = await Promise.all(manifest.artifacts.filter((a) => a.path !== null).map(async (a) => ({ path: a.path as string, bytes: await readFile(join(out, a.path as string)) })));
  return { files, manifest, text };
}

describe("evidence ids are the coordinator's to issue", () => {
  let lab: { serial: string; physicalId: string; device: SimDevice };
  let labId: string;
  let evidenceId: string;

  beforeAll(async () => {
    lab = await phone(labAdb, "EVIDENCE01", "lab");
    labId = await agentId("lab");
    const captured = await farm(["evidence", "capture", "--device", lab.serial], userEnv("alice"));
    evidenceId = String(captured.json["evidenceId"]);
    expect(evidenceId, captured.stdout).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("refuses a forged bundle from an agent the id was not issued to, and leaves the real bundle intact", async () => {
    const real = await pulled(evidenceId, "real");
    const forgedManifest = JSON.stringify({ ...real.manifest, label: "forged" });
    // A stolen agent token of a host that never attached.
    const attackerToken = await token("agent", "thief");
    // Under the real id, claiming to be the lab's agent.
    const overReal = await upload(attackerToken, { evidenceId, agentId: labId, serial: lab.serial, physicalId: lab.physicalId, kind: "still" }, real.files, forgedManifest);
    expect(overReal).toMatchObject({ ok: false, code: "EVIDENCE_NOT_ISSUED" });
    // Under a fresh id nobody issued.
    const fresh = randomUUID();
    const made = await upload(attackerToken, { evidenceId: fresh, agentId: labId, serial: lab.serial, physicalId: lab.physicalId, kind: "still" }, real.files, JSON.stringify({ ...real.manifest, evidenceId: fresh }));
    expect(made).toMatchObject({ ok: false, code: "EVIDENCE_NOT_ISSUED", field: "evidence_id" });
    const listed = (await farm(["evidence", "list"], env)).json["bundles"] as { evidenceId: string }[];
    expect(listed.map((b) => b.evidenceId)).not.toContain(fresh);
    expect(listed.map((b) => b.evidenceId)).toContain(evidenceId);
    // The real bundle, byte for byte.
    expect((await pulled(evidenceId, "real-again")).text).toBe(real.text);
  });

  it("refuses an upload by the issued agent's token for another device", async () => {
    const labToken = tokens.get("lab") as string;
    const real = await pulled(evidenceId, "other-device");
    const r = await upload(labToken, { evidenceId, agentId: labId, serial: "someone-elses-phone", physicalId: lab.physicalId, kind: "still" }, real.files, real.text);
    expect(r).toMatchObject({ ok: false, code: "EVIDENCE_NOT_ISSUED", field: "serial" });
  });

  it("refuses a recording before it runs when nothing is left of the user's quota", async () => {
    const before = ((await farm(["evidence", "video", "list"], env)).json["recordings"] as unknown[]).length;
    expect((await farm(["evidence", "capture", "--device", lab.serial], userEnv("carol"))).json["evidenceId"]).toBeDefined();
    // Beside a stored still, a recording holds the rest of the 2 GiB (less than its largest bundle); a second finds nothing.
    const first = await farm(["evidence", "video", "start", "--device", lab.serial, "--duration-seconds", "30"], userEnv("carol"));
    expect(first.json).toMatchObject({ ok: true, status: "recording" });
    const over = await farm(["evidence", "video", "start", "--device", lab.serial, "--duration-seconds", "5"], userEnv("carol"));
    expect(over.json).toMatchObject({ ok: false, code: "QUOTA_EXCEEDED", field: "quota" });
    expect(String(over.json["message"])).toContain("carol");
    expect(String(over.json["message"])).toContain("--evidence-quota");
    expect(((await farm(["evidence", "video", "list"], env)).json["recordings"] as unknown[]).length).toBe(before + 1);
    const stopped = await farm(["evidence", "video", "stop", "--session", String(first.json["sessionId"])], userEnv("carol"));
    // An idle screen records no frames (a partial bundle); stored, it fit what was left.
    expect(stopped.json).toMatchObject({ sessionId: first.json["sessionId"], stored: true });
  });
});

/**
 * An agent driven by hand: attaches with its own token, reports one phone
 * and answers commands as `answer` says: the shape of a compromised host.
 */
type Answer = Pick<MessageInitShape<typeof AgentCallResultSchema>, "error" | "response">;

async function liar(name: string, answer: (call: AgentCall) => Answer): Promise<{ id: string; serial: string; close(): void }> {
  const secret = await token("agent", name);
  const id = `${name}-agent-id`;
  const serial = `${name}-phone`;
  const out = new AsyncQueue<AttachRequest>();
  const stop = new AbortController();
  const send = (kind: MessageInitShape<typeof AttachRequestSchema>["kind"]) => out.push(create(AttachRequestSchema, { kind }));
  send({ case: "hello", value: { agentId: id, name, hostname: "compromised", protocolVersion: PROTOCOL_VERSION, agentVersion: "evil", heartbeatIntervalMs: 500 } });
  const it = createClient(AgentService, createGrpcTransport({ baseUrl: url, interceptors: [bearer(secret)] })).attach(out, { signal: stop.signal })[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done || first.value.kind.case !== "helloAccepted") throw new Error(`${name} not accepted`);
  send({ case: "inventory", value: { devices: [{ serial, state: "device", properties: { model: "Pixel 7", apiLevel: 34, serialno: `${name}-sn`, physicalId: `pd-${name}`, identityStatus: "ok" } }] } });
  const beat = setInterval(() => send({ case: "heartbeat", value: {} }), 250);
  void (async () => {
    for (;;) {
      const r = await it.next().catch(() => ({ done: true as const, value: undefined }));
      if (r.done) return;
      if (r.value.kind.case === "call") send({ case: "callResult", value: { ...answer(r.value.kind.value), commandId: r.value.kind.value.commandId } });
    }
  })();
  await waitFor(`${name} listed`, async () => ((await devices()).some((d) => d.serial === serial) ? true : undefined));
  return {
    id,
    serial,
    close() {
      clearInterval(beat);
      stop.abort();
      out.close();
    },
  };
}

describe("video session ids are the coordinator's to issue", () => {
  it("refuses answers and uploads that pre-empt another agent's live session; the real recording is stored", async () => {
    const recorded = await phone(labAdb, "VIDEOLAB01", "lab");
    animations.push(setInterval(() => recorded.device.state.screen.changed(), 50));
    const started = await farm(["evidence", "video", "start", "--device", recorded.serial, "--duration-seconds", "30", "--size", "216x480"], userEnv("bob"));
    expect(started.json).toMatchObject({ ok: true, status: "recording" });
    const live = String(started.json["sessionId"]);
    const labId = await agentId("lab");

    // A lying agent answers a start on its own phone with the lab's live session.
    let honestSession = "";
    const forger = await liar("forger", (call) => {
      const session = (sessionId: string, status: string) => create(VideoSessionSchema, { sessionId, status, agentId: "forger-agent-id", serial: "forger-phone", physicalId: "pd-forger", workerAvailable: status === "recording" });
      // Every VideoService answer is { session }: encoded as the method called.
      const answer = (sessionId: string, status: string): Answer => {
        const m = VideoService.methods.find((x) => methodPath(x) === call.method) as (typeof VideoService.methods)[number];
        return { response: toBinary(m.output, create(m.output, { session: session(sessionId, status) })) };
      };
      if (call.method === methodPath(VideoService.method.startVideo)) {
        // First start: the lie; any later start: an honest answer for the id it was given.
        if (honestSession === "pending") {
          honestSession = fromBinary(StartVideoRequestSchema, call.request).sessionId;
          return answer(honestSession, "recording");
        }
        return answer(live, "complete");
      }
      // Asked about its own session, it answers about the lab's.
      if (call.method === methodPath(VideoService.method.getVideoStatus) || call.method === methodPath(VideoService.method.stopVideo)) return answer(live, "failed");
      return { error: { message: "no", detail: { code: "NOT_IMPLEMENTED" } } };
    });
    try {
      // (As the admin: bob's recording holds his quota.)
      const lie = await farm(["evidence", "video", "start", "--device", forger.serial, "--duration-seconds", "30"], env);
      expect(lie.json).toMatchObject({ ok: false, code: "AGENT_PROTOCOL_VIOLATION" });
      honestSession = "pending";
      const own = await farm(["evidence", "video", "start", "--device", forger.serial, "--duration-seconds", "30"], env);
      expect(own.json).toMatchObject({ ok: true, status: "recording", sessionId: honestSession });
      const repointed = await farm(["evidence", "video", "status", "--session", honestSession], env);
      expect(repointed.json).toMatchObject({ ok: false, code: "AGENT_PROTOCOL_VIOLATION" });

      // The lab's session is still the lab's, live.
      const sessions = (await farm(["evidence", "video", "list"], env)).json["recordings"] as { sessionId: string; agent: string; status: string }[];
      expect(sessions.find((s) => s.sessionId === live)).toMatchObject({ agent: "lab", status: "recording" });

      // An upload under the live session's id, before the lab's worker publishes it:
      // a whole, well-formed bundle (a still one, forged from a stored capture).
      expect((await farm(["evidence", "list", "--device", recorded.serial], env)).json["bundles"]).toEqual([]);
      const stills = (await farm(["evidence", "list"], env)).json["bundles"] as { evidenceId: string; kind: string }[];
      const model = await pulled((stills.find((b) => b.kind === "still") as { evidenceId: string }).evidenceId, "model");
      const forgedManifest = JSON.stringify({ ...model.manifest, evidenceId: live, device: { ...(model.manifest["device"] as object), serial: recorded.serial } });
      const forged = await upload(tokens.get("forger") as string, { evidenceId: live, agentId: labId, serial: recorded.serial, physicalId: recorded.physicalId, kind: "still" }, model.files, forgedManifest);
      expect(forged).toMatchObject({ ok: false, code: "EVIDENCE_NOT_ISSUED" });
    } finally {
      forger.close();
    }

    await new Promise((r) => setTimeout(r, 1_500));
    const stopped = await farm(["evidence", "video", "stop", "--session", live], userEnv("bob"));
    expect(stopped.json).toMatchObject({ ok: true, status: "complete", stored: true, agent: "lab" });
    const bundle = await pulled(live, "video");
    expect(bundle.manifest).toMatchObject({ evidenceId: live, kind: "video", status: "complete" });
    expect(bundle.files.map((f) => f.path)).toContain("video.mp4");
  });
});
