/**
 * A leased phone's screen, tree, log, properties, evidence and video are its
 * holder's. A real coordinator routes every call to an agent whose routed
 * calls run through the agent's own dispatcher (call-dispatch.ts, with the
 * method rules); its device services only count what reaches them. Operator
 * bob's reads of alice's phone are refused before anything is issued or
 * reaches the agent; alice, an admin and bob on a free phone get through.
 */
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DescMethodUnary } from "@bufbuild/protobuf";
import { createClient, type HandlerContext, type ServiceImpl, type Transport } from "@connectrpc/connect";
import { Errors, farmError, toErrorReport, type ErrorReport } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { methodPath } from "@farm/shared/method-rules";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { VideoService } from "@farm/shared/gen/farm/v1/video_service_pb";
import type { ServiceRoute } from "@farm/agent/rpc/routes";
import { callContext } from "@farm/agent/rpc/call-context";
import { startCoordinator, type RunningCoordinator } from "@farm/coordinator/coordinator";
import { attachInProcessAgent, tokenTransport } from "../support/in-process-agent.js";

const AGENT_ID = "holder-agent";
const LEASED = "LEASED01";
const FREE = "FREE0001";

let dir: string;
let coordinator: RunningCoordinator;
let tokens: Record<"alice" | "bob" | "admin" | "agent", string>;
let aliceLease: string;
const stop = new AbortController();
/** Every call that reached the agent's services: method path, caller, serial. */
const reached: { method: string; by: string; serial: string }[] = [];

const grpc = (token: string, lease?: string): Transport => tokenTransport(coordinator.url, token, lease);

/** The agent's device services: each call is counted, then answered as a phone would. */
function note(method: DescMethodUnary, req: { target?: { serial?: string } | undefined }, ctx: HandlerContext): void {
  reached.push({ method: methodPath(method), by: callContext(ctx).requestedBy, serial: req.target?.serial ?? "" });
}

const deviceImpl: Partial<ServiceImpl<typeof DeviceService>> = {
  takeScreenshot: (req, ctx) => (note(DeviceService.method.takeScreenshot, req, ctx), { blobId: "blob-1", width: 1080, height: 2400 }),
  getUiTree: (req, ctx) => (note(DeviceService.method.getUiTree, req, ctx), {}),
  readLogcat: (req, ctx) => (note(DeviceService.method.readLogcat, req, ctx), { text: "I/app: session secret s3cr3t" }),
  listPackages: (req, ctx) => (note(DeviceService.method.listPackages, req, ctx), { packages: ["com.example.private"] }),
  getProperties: (req, ctx) => (note(DeviceService.method.getProperties, req, ctx), { properties: { "persist.ci.token": "s3cr3t" } }),
  getActionReceipt: (req, ctx) => (note(DeviceService.method.getActionReceipt, req, ctx), {}),
  reconcileOwnership: (req, ctx) => (note(DeviceService.method.reconcileOwnership, req, ctx), {}),
  getOwnership: (req, ctx) => (note(DeviceService.method.getOwnership, req, ctx), {}),
};
const evidenceImpl: Partial<ServiceImpl<typeof EvidenceService>> = {
  // Reaching the agent is what is checked; a stored bundle is the e2e's.
  captureEvidence: (req, ctx) => {
    note(EvidenceService.method.captureEvidence, req, ctx);
    throw farmError(Errors.EVIDENCE_CAPTURE_FAILED, "this agent captures nothing");
  },
};
const videoImpl: Partial<ServiceImpl<typeof VideoService>> = {
  startVideo: (req, ctx) => {
    note(VideoService.method.startVideo, req, ctx);
    const serial = req.target?.serial ?? "";
    return { session: { sessionId: req.sessionId, status: "recording", serial, agentId: AGENT_ID, physicalId: `pd-${serial}`, workerAvailable: true } };
  },
};
const routes = [
  { service: DeviceService, impl: deviceImpl },
  { service: EvidenceService, impl: evidenceImpl },
  { service: VideoService, impl: videoImpl },
] as unknown as ServiceRoute[];

/** Attaches the agent with the two phones and answers every routed call through its dispatcher. */
async function attachAgent(): Promise<void> {
  await attachInProcessAgent({ baseUrl: coordinator.url, agentToken: tokens.agent, agentId: AGENT_ID, routes, phones: [{ serial: LEASED }, { serial: FREE }], signal: stop.signal });
}

/** Every file under a directory, by relative path (the database's own files aside: refusals are in the activity log). */
async function filesIn(root: string): Promise<string[]> {
  const all = await readdir(root, { recursive: true, withFileTypes: true });
  return all
    .filter((e) => e.isFile() || e.isDirectory())
    .map((e) => join(e.parentPath, e.name).slice(root.length))
    .filter((p) => !/coordinator\.db/.test(p))
    .sort();
}

/** The error a call fails with, or undefined when it succeeds. */
const refusal = (p: Promise<unknown>): Promise<ErrorReport | undefined> => p.then(() => undefined, toErrorReport);

/** The reads of a phone, each as one call by one caller. */
const reads: Record<string, (t: Transport, serial: string) => Promise<unknown>> = {
  "take its screenshot": (t, serial) => createClient(DeviceService, t).takeScreenshot({ target: { serial } }),
  "read its UI tree": (t, serial) => createClient(DeviceService, t).getUiTree({ target: { serial } }),
  "read its logcat": (t, serial) => createClient(DeviceService, t).readLogcat({ target: { serial } }),
  "list its apps": (t, serial) => createClient(DeviceService, t).listPackages({ target: { serial } }),
  "read its properties": (t, serial) => createClient(DeviceService, t).getProperties({ target: { serial } }),
  "capture evidence of it": (t, serial) => createClient(EvidenceService, t).captureEvidence({ target: { serial } }),
  "start a recording of it": (t, serial) => createClient(VideoService, t).startVideo({ target: { serial }, durationSeconds: 5 }),
};

/** What a call that got past the coordinator answers: the agent's answer (capture: the agent's own failure). */
function passed(what: string, err: ErrorReport | undefined): void {
  if (what === "capture evidence of it") expect(err, what).toMatchObject({ code: Errors.EVIDENCE_CAPTURE_FAILED.code });
  else expect(err, what).toBeUndefined();
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-holder-reads-"));
  coordinator = await startCoordinator({ listen: { host: "127.0.0.1", port: 0 }, dataDir: join(dir, "data"), dashboardDir: null, log: createLogger({ level: "error" }) });
  tokens = {
    alice: (await coordinator.tokens.create("alice", "user", "operator")).secret,
    bob: (await coordinator.tokens.create("bob", "user", "operator")).secret,
    admin: (await coordinator.tokens.create("root", "user", "admin")).secret,
    agent: (await coordinator.tokens.create(AGENT_ID, "agent")).secret,
  };
  await attachAgent();
  const registry = createClient(RegistryService, grpc(tokens.admin));
  for (;;) {
    const devices = (await registry.listDevices({ agent: AGENT_ID })).devices;
    if (devices.filter((d) => d.state === "device" && d.properties?.physicalId).length === 2) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  aliceLease = (await createClient(LeaseService, grpc(tokens.alice)).acquireLease({ selector: { serial: LEASED }, ttlMs: 600_000 })).token;
});

afterAll(async () => {
  stop.abort();
  await coordinator?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("a leased phone's reads are its holder's", () => {
  it.each(Object.keys(reads))("refuses another operator to %s: LEASE_HELD_BY_OTHER naming the holder, before anything reaches the agent", async (what) => {
    const before = reached.length;
    const files = await filesIn(join(dir, "data"));
    const err = await refusal((reads[what] as (t: Transport, s: string) => Promise<unknown>)(grpc(tokens.bob), LEASED));
    expect(err).toMatchObject({ code: Errors.LEASE_HELD_BY_OTHER.code, field: "lease", dispatched: false, ambiguous: false });
    expect(err?.message).toMatch(/^device pd-LEASED01 is leased by alice until \S+; only the holder or an admin may /);
    expect(err?.message.endsWith(`may ${what}`), err?.message).toBe(true);
    expect(reached.slice(before)).toEqual([]);
    // Nothing was staged or stored for it: the data dir holds the files it held.
    expect(await filesIn(join(dir, "data"))).toEqual(files);
  });

  it.each(Object.keys(reads))("lets the holder (by token, or by lease token) and an admin %s", async (what) => {
    const read = reads[what] as (t: Transport, s: string) => Promise<unknown>;
    for (
      const [t, by] of [
        [grpc(tokens.alice), "alice"],
        [grpc(tokens.bob, aliceLease), "bob"],
        [grpc(tokens.admin), "root"],
      ] as const
    ) {
      const before = reached.length;
      passed(what, await refusal(read(t, LEASED)));
      expect(reached.slice(before)).toMatchObject([{ by, serial: LEASED }]);
    }
  });

  it.each(Object.keys(reads))("lets any operator %s when it is free", async (what) => {
    const before = reached.length;
    passed(what, await refusal((reads[what] as (t: Transport, s: string) => Promise<unknown>)(grpc(tokens.bob), FREE)));
    expect(reached.slice(before)).toMatchObject([{ by: "bob", serial: FREE }]);
  });

  it("keeps the journal's receipts and reconciliation for the holder, and its ownership status for anyone", async () => {
    const bob = createClient(DeviceService, grpc(tokens.bob));
    expect(await refusal(bob.getActionReceipt({ target: { serial: LEASED }, actionId: "act-1" }))).toMatchObject({
      code: Errors.LEASE_HELD_BY_OTHER.code,
      message: expect.stringMatching(/only the holder or an admin may read its action receipts$/),
    });
    expect(await refusal(bob.reconcileOwnership({ target: { serial: LEASED } }))).toMatchObject({ code: Errors.LEASE_HELD_BY_OTHER.code, message: expect.stringMatching(/only the holder or an admin may reconcile its ownership journal$/) });
    expect(await refusal(bob.getOwnership({ target: { serial: LEASED } }))).toBeUndefined();
    expect(await refusal(createClient(DeviceService, grpc(tokens.alice)).getActionReceipt({ target: { serial: LEASED }, actionId: "act-1" }))).toBeUndefined();
  });
});
