/**
 * Sessions from the library without a Lease object (as `farm session
 * start|end|list` and `farm wait` / `farm assert visual` use them) against
 * a stand-in coordinator: a real HTTP/2 Connect server in this process
 * answering the session, registry, blob and device calls the way the
 * coordinator's handlers do. Under test is the client side: the requests
 * it makes (headers, filters, pages, uploads), the checks made before a
 * step is recorded, and failures as FarmError with the table's code.
 */
import { createHash } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { Errors, refusal } from "@farm/shared/errors";
import { BlobPartSchema, type BlobPart } from "@farm/shared/gen/farm/v1/blob_pb";
import { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { DeviceSchema } from "@farm/shared/gen/farm/v1/registry_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { SessionSchema, SessionService, SessionStatus, SessionStepSchema, type AppendSessionStepRequest, type ListSessionsRequest } from "@farm/shared/gen/farm/v1/session_service_pb";
import type { FarmClient } from "./index.js";
import { farmFailure, startStandInCoordinator, type StandInCoordinator } from "./testing/stand-in-coordinator.js";
import type { ClientStep } from "./session-steps.js";

const PNG = Buffer.from("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4e10000000049454e44ae426082", "hex");
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

let standIn: StandInCoordinator | undefined;
let farm: FarmClient | undefined;
let calls: string[] = [];
let lists: ListSessionsRequest[] = [];
let appended: AppendSessionStepRequest[] = [];
let uploads: { name: string; size: number; sha256: string }[] = [];
let startHeaders: { lease: string | null } | undefined;
/** Whether the stand-in's screenshots fail (a phone gone offline). */
let screenshotFails = false;

const sessionsById: Record<string, { status: SessionStatus; serial: string; physicalId: string }> = {
  "s-run": { status: SessionStatus.RUNNING, serial: "emulator-5554", physicalId: "pd-1" },
  "s-done": { status: SessionStatus.PASSED, serial: "emulator-5554", physicalId: "pd-1" },
};

function routes(router: ConnectRouter): void {
  router.service(SessionService, {
    startSession: (req, ctx) => {
      calls.push(`StartSession ${req.target?.serial} ${req.policyJson} ${req.secrets.map((s) => s.name).join(",")}`);
      startHeaders = { lease: ctx.requestHeader.get("x-farm-lease") };
      return { session: create(SessionSchema, { sessionId: "s-new", name: req.name, serial: req.target?.serial ?? "", status: SessionStatus.RUNNING }) };
    },
    endSession: (req) => {
      calls.push(`EndSession ${req.sessionId} ${SessionStatus[req.status]}`);
      return { session: create(SessionSchema, { sessionId: req.sessionId, status: req.status }) };
    },
    getSession: (req) => {
      calls.push(`GetSession ${req.sessionId}`);
      const s = sessionsById[req.sessionId];
      if (!s) throw refusal(Errors.SESSION_NOT_FOUND, `no session ${req.sessionId}`, "session_id");
      return { session: create(SessionSchema, { sessionId: req.sessionId, ...s, policySha256: "ab".repeat(32) }) };
    },
    listSessions: (req) => {
      lists.push(req);
      // Two pages: the client must follow the token.
      if (req.pageToken === "") return { sessions: [create(SessionSchema, { sessionId: "a" })], nextPageToken: "p2" };
      return { sessions: [create(SessionSchema, { sessionId: "b" })], nextPageToken: "" };
    },
    appendSessionStep: (req) => {
      appended.push(req);
      return { step: create(SessionStepSchema, { sequence: 7 }) };
    },
  });
  router.service(RegistryService, {
    listDevices: (req) => {
      calls.push(`ListDevices ${req.physicalId}`);
      // pd-1 shows two serials (USB and over Wi-Fi).
      return { devices: req.physicalId === "pd-1" ? [create(DeviceSchema, { serial: "emulator-5554" }), create(DeviceSchema, { serial: "10.0.0.5:5555" })] : [], nextPageToken: "" };
    },
  });
  router.service(BlobService, {
    async uploadBlob(stream) {
      let header: { name: string; size: number; sha256: string } | undefined;
      for await (const m of stream) {
        const p: BlobPart | undefined = m.part;
        if (p?.kind.case === "header") header = { name: p.kind.value.name, size: Number(p.kind.value.size), sha256: p.kind.value.sha256 };
      }
      if (header) uploads.push(header);
      return { blobId: `blob-${uploads.length}` };
    },
    async *downloadBlob() {
      yield { part: create(BlobPartSchema, { kind: { case: "header", value: { size: BigInt(PNG.length), sha256: sha(PNG), name: "screen.png" } } }) };
      yield { part: create(BlobPartSchema, { kind: { case: "chunk", value: PNG } }) };
    },
  });
  router.service(DeviceService, {
    takeScreenshot: (_req, ctx) => {
      calls.push(`TakeScreenshot session=${ctx.requestHeader.get("x-farm-session")}`);
      if (screenshotFails) throw refusal(Errors.DEVICE_OFFLINE, "emulator-5554 is offline", "target.serial");
      return { blobId: "shot", width: 1, height: 1, size: BigInt(PNG.length), sha256: sha(PNG) };
    },
  });
}

beforeEach(async () => {
  calls = [];
  lists = [];
  appended = [];
  uploads = [];
  startHeaders = undefined;
  screenshotFails = false;
  standIn = await startStandInCoordinator(routes);
  farm = standIn.farm;
});

afterEach(async () => {
  await standIn?.close();
  standIn = undefined;
});

const failure = farmFailure;

const step = (over: Partial<ClientStep> = {}): ClientStep => ({
  action: "wait",
  description: "wait for text \"Next\"",
  arguments: { timeoutMs: 1000 },
  ok: true,
  response: { polls: 2 },
  files: [],
  startMs: Date.UTC(2026, 0, 1),
  durationMs: 12.6,
  before: { bytes: PNG, sha256: sha(PNG), capturedAt: Date.UTC(2026, 0, 1) },
  after: { bytes: PNG, sha256: sha(PNG), capturedAt: Date.UTC(2026, 0, 1, 0, 0, 1) },
  ...over,
});

describe("sessions by id", () => {
  it("starts a session on a phone leased elsewhere, with its lease token, policy and secrets; ends it; lists every page with the filter", async () => {
    const c = farm as FarmClient;
    const s = await c.startSession("emulator-5554", { lease: "farml_other", name: "login", policyJson: "{\"version\":1}", secrets: [{ name: "PIN", value: "1234" }] });
    expect(s.sessionId).toBe("s-new");
    expect(startHeaders).toEqual({ lease: "farml_other" });
    expect(calls).toEqual(["StartSession emulator-5554 {\"version\":1} PIN"]);
    const ended = await c.endSession("s-new", "failed");
    expect(ended?.status).toBe(SessionStatus.FAILED);
    const all = await c.sessions({ serial: "emulator-5554", status: "lease-ended", owner: "ci" });
    expect(all.map((x) => x.sessionId)).toEqual(["a", "b"]);
    expect(lists.map((l) => [l.serial, l.status, l.owner, l.pageToken])).toEqual([
      ["emulator-5554", SessionStatus.LEASE_ENDED, "ci", ""],
      ["emulator-5554", SessionStatus.LEASE_ENDED, "ci", "p2"],
    ]);
  });

  it("refuses a status that is not one, and a context that is not an object, before anything is sent", async () => {
    const c = farm as FarmClient;
    expect(await failure(c.sessions({ status: "done" as unknown as "passed" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "status" });
    expect(await failure(c.startSession("emulator-5554", { context: "x".repeat(20_000) as unknown as Record<string, unknown> }))).toMatchObject({ code: "INVALID_ARGUMENT" });
    expect(lists).toEqual([]);
    expect(calls).toEqual([]);
  });
});

describe("a step recorder", () => {
  it("refuses a session that is missing, ended, or on another phone, naming where its id came from", async () => {
    const c = farm as FarmClient;
    const gone = await failure(c.stepRecorder("s-none", "emulator-5554", { source: "FARM_SESSION" }));
    expect(gone).toMatchObject({ code: "SESSION_NOT_FOUND" });
    const ended = await failure(c.stepRecorder("s-done", "emulator-5554", { source: "FARM_SESSION" }));
    expect(ended).toMatchObject({ code: "SESSION_ENDED", field: "session", message: "session s-done (FARM_SESSION) has ended; unset FARM_SESSION or start a new one" });
    expect((await failure(c.stepRecorder("s-done", "emulator-5554"))).message).toBe("session s-done has ended; start a new one");
    const other = await failure(c.stepRecorder("s-run", "emulator-9999"));
    expect(other).toMatchObject({ code: "SESSION_MISMATCH", field: "device", message: "session s-run is on phone emulator-5554 (pd-1); this command goes to emulator-9999" });
    // Another serial of the same phone is the same phone.
    const wifi = await c.stepRecorder("s-run", "10.0.0.5:5555");
    expect(wifi).toMatchObject({ sessionId: "s-run", policySha256: "ab".repeat(32) });
  });

  it("uploads the files and a changed screen, names an unchanged after screen by its sha256, and returns the sequence", async () => {
    const rec = await (farm as FarmClient).stepRecorder("s-run", "emulator-5554");
    const diag = Buffer.from("{\"polls\":2}\n");
    const seq = await rec.append(
      step({ ok: false, errorCode: "COMMAND_TIMEOUT", errorMessage: "not found", files: [{ name: "wait-timeout.json", kind: "diagnosis", provider: "runner", mimeType: "application/json", when: "", bytes: diag }] }),
    );
    expect(seq).toBe(7);
    expect(uploads).toEqual([{ name: "wait-timeout.json", size: diag.length, sha256: sha(diag) }, { name: "screen.png", size: PNG.length, sha256: sha(PNG) }]);
    const a = appended[0];
    expect(a).toMatchObject({ sessionId: "s-run", action: "wait", ok: false, errorCode: "COMMAND_TIMEOUT", durationMs: 13 });
    expect(a?.artifacts.map((x) => [x.name, x.kind, x.blobId])).toEqual([["wait-timeout.json", "diagnosis", "blob-1"]]);
    expect(a?.before?.blobId).toBe("blob-2");
    expect(a?.after).toMatchObject({ sha256: sha(PNG), blobId: "" });
    // A screen that could not be taken is recorded with its error, nothing uploaded for it.
    uploads = [];
    await rec.append(step({ before: { errorCode: "DEVICE_OFFLINE", errorMessage: "gone", capturedAt: 1 }, after: { errorCode: "DEVICE_OFFLINE", errorMessage: "gone", capturedAt: 2 } }));
    expect(uploads).toEqual([]);
    expect(appended[1]?.before).toMatchObject({ errorCode: "DEVICE_OFFLINE", errorMessage: "gone" });
  });

  it("refuses a kind of step the coordinator does not take before a file is uploaded", async () => {
    const rec = await (farm as FarmClient).stepRecorder("s-run", "emulator-5554");
    const r = await rec.record(step({ action: "my-check" as unknown as "wait", files: [{ name: "x.json", kind: "diagnosis", provider: "runner", mimeType: "application/json", when: "", bytes: Buffer.from("{}") }] }));
    expect(r).toMatchObject({ ok: false, code: "INVALID_ARGUMENT" });
    expect(uploads).toEqual([]);
    expect(appended).toEqual([]);
  });

  it("record() returns a failure instead of throwing it, so the step's own outcome is still reported", async () => {
    const rec = await (farm as FarmClient).stepRecorder("s-run", "emulator-5554");
    await standIn?.stopServing();
    const r = await rec.record(step());
    expect(r).toMatchObject({ ok: false, sessionId: "s-run", code: "COORDINATOR_UNAVAILABLE" });
  });

  it("takes a step's screen outside the session, and keeps a failed one as its error", async () => {
    const d = (farm as FarmClient).device("emulator-5554", { lease: "farml_x" });
    const shot = await d.stepShot();
    expect(shot).toMatchObject({ sha256: sha(PNG) });
    expect("bytes" in shot && Buffer.from(shot.bytes).equals(PNG)).toBe(true);
    screenshotFails = true;
    const failed = await d.stepShot();
    expect(failed).toMatchObject({ errorCode: "DEVICE_OFFLINE", errorMessage: "emulator-5554 is offline" });
    expect(calls.filter((x) => x.startsWith("TakeScreenshot"))).toEqual(["TakeScreenshot session=null", "TakeScreenshot session=null"]);
  });
});
