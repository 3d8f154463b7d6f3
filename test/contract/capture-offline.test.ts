/**
 * A capture is refused before anything is issued when its phone is not
 * usable: a real coordinator, an agent that reports one phone `device` and
 * one `offline` (as adb shows a phone that dropped off). The offline one is
 * DEVICE_OFFLINE on target.serial, not dispatched: no call reaches the
 * agent, no evidence id is issued, no file is written.
 */
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, type ServiceImpl, type Transport } from "@connectrpc/connect";
import { Errors, farmError, toErrorReport } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import type { ServiceRoute } from "@farm/agent/rpc/routes";
import { startCoordinator, type RunningCoordinator } from "@farm/coordinator/coordinator";
import { attachInProcessAgent, tokenTransport } from "../support/in-process-agent.js";

const AGENT_ID = "offline-agent";
const ONLINE = "ONLINE01";
const OFFLINE = "OFFLINE1";

let dir: string;
let coordinator: RunningCoordinator;
let tokens: Record<"alice" | "agent", string>;
const stop = new AbortController();
/** Every capture that reached the agent, by serial. */
const reached: string[] = [];

const grpc = (token: string): Transport => tokenTransport(coordinator.url, token);

const evidenceImpl: Partial<ServiceImpl<typeof EvidenceService>> = {
  // Reaching the agent is what is checked: a real agent would store a failed bundle here.
  captureEvidence: (req) => {
    reached.push(req.target?.serial ?? "");
    throw farmError(Errors.EVIDENCE_CAPTURE_FAILED, "this agent captures nothing");
  },
};

async function attachAgent(): Promise<void> {
  await attachInProcessAgent({
    baseUrl: coordinator.url,
    agentToken: tokens.agent,
    agentId: AGENT_ID,
    routes: [{ service: EvidenceService, impl: evidenceImpl }] as unknown as ServiceRoute[],
    phones: [{ serial: ONLINE }, { serial: OFFLINE, state: "offline" }],
    signal: stop.signal,
  });
}

/** Every file under the data dir but the database's own. */
async function filesIn(root: string): Promise<string[]> {
  const all = await readdir(root, { recursive: true, withFileTypes: true });
  return all
    .map((e) => join(e.parentPath, e.name).slice(root.length))
    .filter((p) => !/coordinator\.db/.test(p))
    .sort();
}

/** Evidence ids issued so far (grants), read from the coordinator's database. */
function grants(): number {
  const db = new Database(join(dir, "data", "coordinator.db"), { readonly: true });
  try {
    return (db.prepare("SELECT count(*) AS n FROM evidence_grants").get() as { n: number }).n;
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-capture-offline-"));
  coordinator = await startCoordinator({ listen: { host: "127.0.0.1", port: 0 }, dataDir: join(dir, "data"), dashboardDir: null, log: createLogger({ level: "error" }) });
  tokens = { alice: (await coordinator.tokens.create("alice", "user", "operator")).secret, agent: (await coordinator.tokens.create(AGENT_ID, "agent")).secret };
  await attachAgent();
  const registry = createClient(RegistryService, grpc(tokens.alice));
  for (;;) {
    const devices = (await registry.listDevices({ agent: AGENT_ID })).devices;
    if (devices.length === 2 && devices.every((d) => d.properties?.physicalId)) break;
    await new Promise((r) => setTimeout(r, 20));
  }
});

afterAll(async () => {
  stop.abort();
  await coordinator?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("a capture of a phone shown offline", () => {
  it("is DEVICE_OFFLINE on target.serial, not dispatched, before an evidence id is issued or a file written", async () => {
    const files = await filesIn(join(dir, "data"));
    const issued = grants();
    const client = createClient(EvidenceService, grpc(tokens.alice));
    const err = await client.captureEvidence({ target: { serial: OFFLINE } }, { timeoutMs: 20_000 }).then(() => undefined, toErrorReport);
    expect(err).toMatchObject({ code: Errors.DEVICE_OFFLINE.code, field: "target.serial", dispatched: false, ambiguous: false });
    expect(err?.message).toContain("offline");
    expect(reached).toEqual([]);
    expect(grants()).toBe(issued);
    expect(await filesIn(join(dir, "data"))).toEqual(files);
    expect((await client.listEvidence({})).bundles).toEqual([]);
  });

  it("still reaches the agent for the phone beside it that is online", async () => {
    const issued = grants();
    const err = await createClient(EvidenceService, grpc(tokens.alice)).captureEvidence({ target: { serial: ONLINE } }).then(() => undefined, toErrorReport);
    expect(err).toMatchObject({ code: Errors.EVIDENCE_CAPTURE_FAILED.code });
    expect(reached).toEqual([ONLINE]);
    expect(grants()).toBe(issued + 1);
  });
});
